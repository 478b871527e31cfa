//! How an utterance is cut into the deltas it streams in: a few words at a time, and never so
//! many pieces that a long one overruns a live stream's channel.

/// The most pieces one utterance is streamed in: well under the hub's per-session channel
/// (256 notes), so a long utterance (the summary of a long interview) never cuts a live stream
/// off as a subscriber that fell behind.
const MAX_PIECES: usize = 64;

/// Splits text into small pieces: three words at a time, or six characters of CJK text — more
/// per piece when that would make more than [`MAX_PIECES`].
pub fn chunks(text: &str) -> Vec<String> {
    if !text.contains(' ') {
        let chars: Vec<char> = text.chars().collect();
        let size = chars.len().div_ceil(MAX_PIECES).max(6);
        return chars.chunks(size).map(|c| c.iter().collect()).collect();
    }
    let words = text.split_inclusive(' ').count();
    let size = words.div_ceil(MAX_PIECES).max(3);
    let mut out = Vec::new();
    let mut current = String::new();
    for (i, piece) in text.split_inclusive(' ').enumerate() {
        current.push_str(piece);
        if i % size == size - 1 {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn chunks_rebuild_the_text() {
        for text in [
            "How do you usually plan your groceries for the week?",
            "你平时怎么计划每周买菜？",
            "Hi",
        ] {
            assert_eq!(super::chunks(text).concat(), text);
        }
    }

    #[test]
    fn a_long_utterance_streams_in_a_bounded_number_of_pieces() {
        let long = "word ".repeat(5_000);
        let pieces = super::chunks(&long);
        assert!(pieces.len() <= super::MAX_PIECES, "{}", pieces.len());
        assert_eq!(pieces.concat(), long);
        let cjk = "买菜".repeat(3_000);
        let pieces = super::chunks(&cjk);
        assert!(pieces.len() <= super::MAX_PIECES, "{}", pieces.len());
        assert_eq!(pieces.concat(), cjk);
        assert_eq!(super::chunks("one two three four").len(), 2);
    }
}
