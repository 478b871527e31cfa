//! Reading string fields out of a JSON object that is still arriving.
//!
//! A streamed tool call delivers its arguments as JSON text in pieces. To show the `message`
//! argument while it streams, we need the part of that string received so far — decoded, and
//! never cut inside an escape sequence. This handles only what we need: a top-level string field
//! of an object whose keys are plain strings.

/// The decoded value of top-level string field `key` so far, and whether it is complete.
pub fn string_field(json: &str, key: &str) -> Option<(String, bool)> {
    let bytes = json.as_bytes();
    let mut i = skip_ws(bytes, 0);
    if bytes.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = skip_ws(bytes, i);
        if bytes.get(i) != Some(&b'"') {
            return None;
        }
        let (name, complete, next) = read_string(json, i + 1);
        if !complete {
            return None;
        }
        i = skip_ws(bytes, next);
        if bytes.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(bytes, i + 1);
        if name == key {
            return match bytes.get(i) {
                Some(b'"') => {
                    // A closing quote ends the value only when the object goes on as JSON after
                    // it: an unescaped quote inside the text ("When you say "list", …") is not
                    // the end of the message, and what came before it is no whole message.
                    let (value, closed, next) = read_string(json, i + 1);
                    let after = bytes.get(skip_ws(bytes, next));
                    Some((value, closed && matches!(after, Some(b',' | b'}'))))
                }
                _ => None,
            };
        }
        i = skip_ws(bytes, skip_value(json, i)?);
        match bytes.get(i) {
            Some(b',') => i += 1,
            _ => return None,
        }
    }
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
        i += 1;
    }
    i
}

/// Decodes a string body starting after its opening quote: (text, closed, index after it).
fn read_string(json: &str, start: usize) -> (String, bool, usize) {
    let mut out = String::new();
    let mut chars = json[start..].char_indices();
    while let Some((offset, c)) = chars.next() {
        match c {
            '"' => return (out, true, start + offset + 1),
            '\\' => {
                let Some((_, e)) = chars.next() else { break };
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'u' => {
                        let hex: String = chars.by_ref().take(4).map(|(_, h)| h).collect();
                        if hex.len() < 4 {
                            break;
                        }
                        let Ok(code) = u32::from_str_radix(&hex, 16) else {
                            break;
                        };
                        if (0xD800..0xDC00).contains(&code) {
                            // A surrogate pair: wait for its second half.
                            let rest: String = chars.by_ref().take(6).map(|(_, h)| h).collect();
                            let low = rest
                                .strip_prefix("\\u")
                                .and_then(|h| u32::from_str_radix(h, 16).ok());
                            match low {
                                Some(low) if rest.len() == 6 => {
                                    let combined = 0x10000
                                        + ((code - 0xD800) << 10)
                                        + (low.wrapping_sub(0xDC00) & 0x3FF);
                                    out.extend(char::from_u32(combined));
                                }
                                _ => break,
                            }
                        } else if code == 0 {
                            // PostgreSQL cannot store U+0000; it is shown and kept as U+FFFD.
                            out.push('\u{FFFD}');
                        } else {
                            out.extend(char::from_u32(code));
                        }
                    }
                    other => out.push(other),
                }
            }
            other => out.push(other),
        }
    }
    (out, false, json.len())
}

/// Skips one complete JSON value starting at `i`: the index after it, or None if it is not
/// complete yet.
fn skip_value(json: &str, i: usize) -> Option<usize> {
    let bytes = json.as_bytes();
    match bytes.get(i)? {
        b'"' => {
            let (_, complete, next) = read_string(json, i + 1);
            complete.then_some(next)
        }
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < bytes.len() {
                match bytes[j] {
                    b'"' => {
                        let (_, complete, next) = read_string(json, j + 1);
                        if !complete {
                            return None;
                        }
                        j = next;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            // A number, true, false or null: complete once a delimiter follows.
            let end = bytes[i..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace())?;
            Some(i + end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::string_field;

    #[test]
    fn reads_a_field_while_it_streams() {
        let full = r#"{"objective_id": "o1", "rationale": "vague \"answer\"", "message": "Could you tell me\nmore? \u00e9\ud83d\ude00", "x": [1, {"y": 2}]}"#;
        let mut seen = Vec::new();
        for end in 0..=full.len() {
            if !full.is_char_boundary(end) {
                continue;
            }
            if let Some((text, _)) = string_field(&full[..end], "message") {
                seen.push(text);
            }
        }
        // Every partial reading is a prefix of the final text, and the last is complete.
        let last = seen.last().unwrap().clone();
        assert_eq!(last, "Could you tell me\nmore? é😀");
        assert!(
            seen.iter().all(|s| last.starts_with(s.as_str())),
            "{seen:?}"
        );
        assert!(string_field(full, "message").unwrap().1);
        assert_eq!(
            string_field(full, "objective_id"),
            Some(("o1".into(), true))
        );
        assert_eq!(string_field(r#"{"rationale": "x", "mess"#, "message"), None);
    }

    #[test]
    fn a_quote_that_breaks_the_json_does_not_end_the_message() {
        let broken = r#"{"objective_id": "o1", "message": "When you say "list", what do you mean?", "rationale": "x"}"#;
        assert_eq!(
            string_field(broken, "message"),
            Some(("When you say ".into(), false))
        );
        // A closing quote whose continuation has not arrived yet is not the end either.
        assert_eq!(
            string_field(r#"{"message": "Hello""#, "message"),
            Some(("Hello".into(), false))
        );
        assert_eq!(
            string_field(r#"{"message": "Hello" }"#, "message"),
            Some(("Hello".into(), true))
        );
    }

    #[test]
    fn nul_never_comes_out() {
        let json = r#"{"message": "a\u0000b"}"#;
        assert_eq!(
            string_field(json, "message"),
            Some(("a\u{FFFD}b".into(), true))
        );
    }

    #[test]
    fn skips_non_string_values_before_the_field() {
        let json = r#"{"fields": [{"a": "}"}], "n": 3, "message": "hi"}"#;
        assert_eq!(string_field(json, "message"), Some(("hi".into(), true)));
    }
}
