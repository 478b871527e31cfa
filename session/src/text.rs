//! The text tests the interview flow relies on: one-word answers, end intent, affirmative replies. Exact and
//! deterministic, so the aggregate can rely on them.

/// Lower-cases and drops everything but letters, digits, CJK and single spaces.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.trim().chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            out.push(c);
        } else if c.is_whitespace() && !out.ends_with(' ') {
            out.push(' ');
        }
    }
    out.trim().to_string()
}

/// A CJK character (Han, kana, Hangul): one counts for a word's worth of meaning or so.
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
}

/// One word in space-separated languages; at most 4 characters in CJK text.
pub fn is_one_word(text: &str) -> bool {
    let n = normalize(text);
    if n.is_empty() {
        return true;
    }
    if n.chars().any(is_cjk) {
        n.chars().filter(|c| !c.is_whitespace()).count() <= 4
    } else {
        !n.contains(' ')
    }
}

/// The whole message (trimmed of punctuation and case) is one of `phrases`, or each of its
/// clauses is ("对，没错。", "Yes. Correct."); never a substring.
pub fn matches_phrase(text: &str, phrases: &[String]) -> bool {
    let is_one = |t: &str| {
        let n = normalize(t);
        !n.is_empty() && phrases.iter().any(|p| normalize(p) == n)
    };
    if is_one(text) {
        return true;
    }
    let clauses: Vec<&str> = clauses(text).filter(|c| !normalize(c).is_empty()).collect();
    clauses.len() > 1 && clauses.into_iter().all(is_one)
}

/// The clauses of a message: split where its writer put a full stop, comma, question mark,
/// exclamation mark or semicolon (Latin or CJK).
pub fn clauses(text: &str) -> impl Iterator<Item = &str> {
    text.split(['.', ',', '?', '!', ';', '。', '，', '？', '！', '；', '、'])
}

/// Whether the text contains any of `patterns` (case-insensitive substrings; for safety and
/// privacy triggers, where a substring is exactly what should count).
pub fn matches_any(text: &str, patterns: &[String]) -> bool {
    let lower = text.to_lowercase();
    patterns
        .iter()
        .any(|p| !p.trim().is_empty() && lower.contains(&p.to_lowercase()))
}

/// Replies that confirm a proposed summary (the default `agent.confirm_phrases`).
pub const AFFIRMATIVE_PHRASES: &[&str] = &[
    "yes",
    "yes that's right",
    "yes thats right",
    "that's right",
    "thats right",
    "correct",
    "right",
    "yep",
    "yeah",
    "sure",
    "exactly",
    "looks good",
    "sounds good",
    "ok",
    "okay",
    "all good",
    "perfect",
    "对",
    "对的",
    "是",
    "是的",
    "没问题",
    "正确",
    "好的",
    "可以",
    "没错",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_word_answers() {
        for (text, one) in [
            ("Yes.", true),
            ("no", true),
            ("I guess so", false),
            ("还行", true),
            ("不知道啊", true),
            ("我每周日去超市买菜", false),
            ("  ", true),
        ] {
            assert_eq!(is_one_word(text), one, "{text:?}");
        }
    }

    #[test]
    fn end_intent_is_a_whole_message_match() {
        let phrases: Vec<String> = ["结束", "stop", "I'm done", "that's all"]
            .map(String::from)
            .to_vec();
        for (text, end) in [
            ("结束", true),
            ("Stop!", true),
            ("i'm done.", true),
            ("That's all", true),
            ("I can't stop using it", false),
            ("结束了吗？我还想说", false),
        ] {
            assert_eq!(matches_phrase(text, &phrases), end, "{text:?}");
        }
    }

    #[test]
    fn affirmative_replies() {
        let defaults: Vec<String> = AFFIRMATIVE_PHRASES.iter().map(|p| p.to_string()).collect();
        assert!(matches_phrase("Yes, that's right!", &defaults));
        assert!(matches_phrase("是的", &defaults));
        assert!(!matches_phrase("Yes but I also cook at home", &defaults));
        assert!(matches_phrase("对，没错。", &defaults));
        assert!(!matches_phrase("对，但我也自己做饭", &defaults));
    }
}
