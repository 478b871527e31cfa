//! What of an upstream error may be kept. A model provider's error body is not ours: some echo
//! the request's key, some the `Authorization` header, some the prompt. What reaches a log line
//! or the permanent `error.recorded` event is short (at most [`MAX_CHARS`] characters), has the
//! configured key cut out, and has every token-shaped word — a bearer value, an `sk-…` key, a
//! long run of letters and digits — replaced by `[redacted]`.

/// The longest message kept.
pub const MAX_CHARS: usize = 200;

const REDACTED: &str = "[redacted]";

fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-_.+/=~".contains(c)
}

/// A run of token characters that looks like a credential: long, with letters and digits
/// together, or letters of both cases mixed inside one word (a letters-only key), or longer
/// than any word (32 characters and more). An error code such as `context_length_exceeded`
/// stays.
fn token_shaped(run: &str) -> bool {
    let has = |f: fn(&char) -> bool| run.chars().any(|c| f(&c));
    let one_word = !run.contains(['_', '.', '-', '/']);
    let mixed_case =
        run.chars().skip(1).any(|c| c.is_ascii_uppercase()) && has(char::is_ascii_lowercase);
    run.len() >= 32
        || run.len() >= 20
            && ((has(char::is_ascii_digit) && has(char::is_ascii_alphabetic))
                || (one_word && mixed_case))
}

/// `text` made safe to keep (see the module doc). `key` is the configured API key, if any.
pub fn redact(text: &str, key: Option<&str>) -> String {
    let mut text = text.to_string();
    if let Some(key) = key.filter(|k| k.len() >= 4) {
        text = text.replace(key, REDACTED);
    }
    // Runs of token characters, and what lies between them, in turn.
    let mut out = String::new();
    let mut after_bearer = false;
    let mut rest = text.as_str();
    while !rest.is_empty() {
        let split = rest.find(|c: char| !token_char(c)).unwrap_or(rest.len());
        let (run, tail) = rest.split_at(split);
        if !run.is_empty() {
            let trimmed = run.trim_end_matches('.');
            let already = run == "redacted";
            if !already && (after_bearer || token_shaped(trimmed)) {
                out.push_str(REDACTED);
                out.push_str(&run[trimmed.len()..]);
            } else {
                out.push_str(run);
            }
            // What follows an authorization scheme or a key's name is the credential, however
            // short.
            after_bearer = [
                "bearer",
                "basic",
                "api-key",
                "x-api-key",
                "api_key",
                "apikey",
            ]
            .iter()
            .any(|scheme| run.eq_ignore_ascii_case(scheme));
        }
        let gap = tail.find(token_char).unwrap_or(tail.len());
        let (between, next) = tail.split_at(gap);
        for c in between.chars() {
            out.push(if c.is_control() { ' ' } else { c });
        }
        rest = next;
    }
    let joined = out.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= MAX_CHARS {
        return joined;
    }
    let mut cut: String = joined.chars().take(MAX_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_token_shaped_words_are_cut_out() {
        let echoed = r#"http error: 401 {"error":{"message":"Incorrect API key provided: sk-proj-abc123DEF456ghi789JKL. Authorization: Bearer xyz","code":"invalid_api_key"}}"#;
        let kept = redact(echoed, Some("sk-proj-abc123DEF456ghi789JKL"));
        assert!(!kept.contains("abc123"), "{kept}");
        assert!(!kept.contains("xyz"), "{kept}");
        assert!(kept.contains("invalid_api_key"), "{kept}");
        assert!(kept.contains("401"), "{kept}");

        assert_eq!(
            redact("Authorization: Basic dXNlcjpwYXNz failed", None),
            "Authorization: Basic [redacted] failed"
        );
        assert_eq!(
            redact("x-api-key: abc123 bad", None),
            "x-api-key: [redacted] bad"
        );
        // Letters only, mixed case: still a key; an error code is not.
        let kept = redact(
            "token QWErtyUIOpasDFGhjkLZXcvbnm rejected: context_length_exceeded",
            None,
        );
        assert_eq!(kept, "token [redacted] rejected: context_length_exceeded");
        assert_eq!(
            redact("key qwertyuiopasdfghjklzxcvbnmqwertyu", None),
            "key [redacted]"
        );
        // An unconfigured key still looks like a key.
        let kept = redact("bad key sk-live-0123456789abcdefABCDEF", None);
        assert_eq!(kept, "bad key [redacted]");
        // Plain words stay; long messages are cut.
        assert_eq!(redact("stream failed: 500", None), "stream failed: 500");
        let long = "word ".repeat(100);
        assert_eq!(redact(&long, None).chars().count(), MAX_CHARS);
    }
}
