//! What a participant may read of the model's text.
//!
//! A model's `message` reaches the participant while it streams, so it is checked while it
//! streams: nothing shown may contain raw JSON or markup, a tool, argument or internal
//! identifier, or talk about being an AI agent, a model or a tool call. The check holds back only
//! the end of the text that could still turn into such a term (a few characters), so words flow
//! as they come; once a term appears the whole utterance is refused and replaced (see
//! `docs/llm-contract.md`). Terms that the study's own participant-facing text uses (a study
//! *about* AI assistants says "AI assistant") are allowed for that study.

use interview_session::study::PinnedStudy;

use super::leaks::Leaks;

/// Terms that never reach a participant (ASCII ones are matched case-insensitively, as whole
/// words where they start or end with a letter).
const TERMS: &[&str] = &[
    // Raw JSON, markup, code and model control text.
    "{",
    "}",
    "()",
    "```",
    "\":",
    "<think",
    "</",
    "<|",
    "[tool",
    "<tool",
    // The contract's own names.
    "ask_question",
    "render_interaction",
    "extract_fields",
    "summarize_and_confirm",
    "judge_screening",
    "objective_id",
    "based_on_turn_id",
    "research_intent",
    "field_id",
    "evidence_turn_ids",
    "rationale",
    "function call",
    "probe_hint",
    "max_probe",
    "output field",
    "output schema",
    "system prompt",
    // Talk about the participant, or the prompt's own labels, instead of to them (a small model
    // echoes its instructions: "What the participant's latest message is.", "Your last
    // decision is to stop").
    "participant",
    "your last decision",
    "asked true",
    "asked false",
    "covered true",
    "covered false",
    "widget shown",
    "one way to say it",
    "the summary could read",
    // Phrases, not single words: "What is your objective when you shop?" and "the user
    // interface" are fair questions; "Your objective is to plan…" and "The user asked you…"
    // (seen from SmolLM2-135M) are the prompt talking.
    "your objective is",
    "the user asked",
    "the user is",
    "the user said",
    "the user wants",
    "the user's",
    "ask the user",
    "the last step (",
    "the runtime's",
    "message calls for it",
    "the last step is about",
    // A closing that reads the prompt's labels back ("Your latest message is, … Your last reply
    // was a wish to stop.", seen from SmolLM2-135M).
    "your latest message is",
    "your last reply was",
    // The model talking about itself ("The model has now finished the interview. We are going
    // to continue with a new one." as a closing, "The model has covered all of the options…",
    // seen from SmolLM2-135M). Phrases: "Which model do you drive?" passes.
    "the model has",
    "the model is",
    "the model was",
    "the model will",
    "the model's",
    // The interviewer speaking as the one interviewed, or grading the participant (seen from
    // SmolLM2-135M as whole messages: "You asked me to walk you through how I usually decide…",
    // "Your last question was about planning…", "Your response is too long. Please limit your
    // responses to 100 words or less."). Phrases, so "How do you limit your food waste?" and
    // "your responses will help us" pass.
    "you asked me to",
    "the question you asked",
    "your last question was",
    "you were asked the question",
    "your response is too",
    "your responses are too",
    "your response was not",
    "limit your responses",
    "limit your response to",
    "question back",
    "json",
    // The schema's own words, echoed from the tool definitions ("maxLength: 500, type: string").
    "maxlength",
    "minlength",
    "type: string",
    // FR-04-27's internal terms (unless the study itself uses the word).
    "tool",
    "agent",
    "harness",
    "langgraph",
    // Talk about being an AI ("an AI assistant" in a question is fine; "as an AI" is not).
    // A phrase that starts with a common word ("the user is", "ask the user") holds that word
    // back until the next one shows it is not the phrase: a word's delay, not a refusal.
    "as an ai",
    "as a language model",
    "i am an ai",
    "i'm an ai",
    "i\u{2019}m an ai",
    "language model",
    "chatbot",
    "bot",
    "作为ai",
    "作为 ai",
    "作為ai",
    "作為人工智能",
    "我是 ai",
    "語言模型",
    "作为一个ai",
    "作为人工智能",
    "我是ai",
    "我是一个ai",
    "我是人工智能",
    "语言模型",
    "调用工具",
    "工具调用",
    "函数调用",
    // The talk about the participant and from the wrong side, in Chinese: "参与者……", "你问我
    // ……", "你的回答太长了" (the English phrases above, as a small model writes them in a
    // Chinese interview). Only phrases no fair question holds: "那你的目标是什么？" and "用户说明书"
    // pass.
    "参与者",
    "问用户",
    "你问我",
    "你的回答太",
    "你的回复太",
];

pub use super::leaks::Refused;

/// The check for one session's study.
#[derive(Debug, Clone, Default)]
pub struct Visible {
    terms: Vec<String>,
    /// `terms` from here on are the internal text's codes, refused without being named.
    codes_from: usize,
    /// The study's internal text, links and markup (`super::leaks`).
    leaks: Leaks,
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Characters with no place in an interviewer's words that would hide a term from the check:
/// invisible format characters and fullwidth Latin letters, digits and braces (fullwidth
/// punctuation, normal in Chinese, is fine).
fn hiding(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}'
        | '\u{FEFF}' | '\u{FF10}'..='\u{FF19}' | '\u{FF21}'..='\u{FF3A}' | '\u{FF41}'..='\u{FF5B}'
        | '\u{FF5D}')
}

/// The text as it is matched: ASCII lower case, every run of whitespace one space. Returns it
/// with, for each of its byte positions (and its end), the position in `text`.
fn fold(text: &str) -> Result<(String, Vec<usize>), Refused> {
    let mut folded = String::with_capacity(text.len());
    let mut map = Vec::with_capacity(text.len() + 1);
    for (i, c) in text.char_indices() {
        if hiding(c) {
            return Err(Refused("a hidden or fullwidth character".into()));
        }
        let c = if c.is_whitespace() {
            ' '
        } else {
            c.to_ascii_lowercase()
        };
        if c == ' ' && folded.ends_with(' ') {
            continue;
        }
        for _ in 0..c.len_utf8() {
            map.push(i);
        }
        folded.push(c);
    }
    map.push(text.len());
    Ok((folded, map))
}

/// Where `term` stops `bytes` (folded): an error if it occurs, else how much may be shown.
fn find_term(bytes: &[u8], term: &str, complete: bool) -> Result<usize, Refused> {
    let t = term.as_bytes();
    let word_start = is_word(t[0]);
    let word_end = is_word(t[t.len() - 1]);
    let starts_ok = |i: usize| !word_start || i == 0 || !is_word(bytes[i - 1]);
    // Only the part that would give the term away is ever held: an identifier from its `_`, a
    // phrase from its last word ("as an " may show; the term is refused before "ai" does), a
    // word whole.
    let hold_from = term
        .find('_')
        .or_else(|| term.rfind(' ').map(|i| i + 1))
        .unwrap_or(0);
    let mut safe = bytes.len();
    let mut from = 0;
    while let Some(found) = find(&bytes[from..], t) {
        let i = from + found;
        let end = i + t.len();
        // The next character, not the next byte: a term may start with a multi-byte one.
        from = i + utf8_len(bytes[i]);
        if !starts_ok(i) {
            continue;
        }
        // The word itself, or its plural, and nothing longer.
        let plural = word_end && bytes.get(end) == Some(&b's');
        let after = if plural { end + 1 } else { end };
        match bytes.get(after) {
            Some(&next) if word_end && is_word(next) => continue,
            None if word_end && !complete => safe = safe.min(i + hold_from),
            _ => return Err(Refused(term.to_string())),
        }
    }
    if !complete {
        // The end of the text may be the beginning of this term.
        for k in (hold_from + 1..t.len()).rev() {
            if bytes.len() >= k && bytes.ends_with(&t[..k]) && starts_ok(bytes.len() - k) {
                safe = safe.min(bytes.len() - k + hold_from);
                break;
            }
        }
    }
    Ok(safe)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The length of the UTF-8 sequence a leading byte starts.
fn utf8_len(b: u8) -> usize {
    match b {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

impl Visible {
    /// The fixed terms, those the study's participant-facing text uses taken out, and the
    /// study's own identifiers that look like identifiers (an objective or field id with `_`).
    pub fn for_study(study: &PinnedStudy) -> Self {
        let config = &study.study_config;
        let mut public = format!(
            "{} {} {}",
            config.title, config.description, config.consent.text
        );
        // What participants read (probe hints are the interviewer's, not theirs).
        for o in &config.objectives {
            public.push_str(&format!(" {} {}", o.title, o.opening_question));
        }
        // A term the study itself uses, as a word (or its plural), is the study's vocabulary.
        let public: String = public.chars().filter(|c| !hiding(*c)).collect();
        let public = fold(&public).map(|(f, _)| f).unwrap_or_default();
        let used = |term: &str| {
            let term = term.to_ascii_lowercase();
            find_term(public.as_bytes(), &term, true).is_err()
        };
        let mut terms: Vec<String> = TERMS
            .iter()
            .filter(|t| !used(t))
            .map(|t| t.to_string())
            .collect();
        let ids = config
            .objectives
            .iter()
            .map(|o| o.id.as_str())
            .chain(study.output_schema.fields.iter().map(|f| f.id.as_str()));
        terms.extend(
            ids.filter(|id| id.contains('_') && !used(id))
                .map(str::to_ascii_lowercase),
        );
        // The study's own text is read with any hiding characters taken out (a note pasted with
        // a soft hyphen is still a note).
        let leaks = Leaks::for_study(study, |t| {
            let plain: String = t.chars().filter(|c| !hiding(*c)).collect();
            fold(&plain).map(|(f, _)| f).unwrap_or_default()
        });
        let codes_from = terms.len();
        terms.extend(leaks.codes.iter().cloned());
        Self {
            terms,
            codes_from,
            leaks,
        }
    }

    /// How many bytes of `text` may be shown now — all of it once `complete`, else all but an
    /// end that could still become a term — or the term that refuses it.
    pub fn check(&self, text: &str, complete: bool) -> Result<usize, Refused> {
        let (folded, map) = fold(text)?;
        let bytes = folded.as_bytes();
        let mut safe = folded.len();
        // Any snake_case token is an identifier (a tool, an argument, an enum value, an id).
        for (i, _) in folded.match_indices('_') {
            let before = i > 0 && bytes[i - 1].is_ascii_alphanumeric();
            match bytes.get(i + 1) {
                Some(b) if before && b.is_ascii_alphanumeric() => {
                    return Err(Refused("an identifier".into()))
                }
                None if before && !complete => safe = safe.min(i),
                _ => {}
            }
        }
        for (i, term) in self.terms.iter().enumerate() {
            let found = find_term(bytes, term, complete);
            // The refusal is logged: an internal code is not repeated there either.
            let found = match found {
                Err(_) if i >= self.codes_from => Err(Refused("the study's internal text".into())),
                other => other,
            };
            safe = safe.min(found?);
        }
        safe = safe.min(self.leaks.check(&folded, complete)?);
        let mut safe = map[safe];
        while !text.is_char_boundary(safe) {
            safe -= 1;
        }
        Ok(safe)
    }

    /// Whether a complete text may be shown.
    pub fn refuses(&self, text: &str) -> Option<Refused> {
        self.check(text, true).err()
    }
}

#[cfg(test)]
#[path = "visible_tests.rs"]
mod tests;
