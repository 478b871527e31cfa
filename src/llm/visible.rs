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

/// Terms that never reach a participant (ASCII ones are matched case-insensitively, as whole
/// words where they start or end with a letter).
const TERMS: &[&str] = &[
    // Raw JSON, markup and model control text.
    "{",
    "}",
    "```",
    "\":",
    "<think",
    "</",
    "<|",
    "[tool",
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
    "tool call",
    "tool_call",
    "function call",
    "call the probe",
    "call the conclude",
    "the probe tool",
    "the conclude tool",
    "probe_hint",
    "max_probe",
    "output field",
    "output schema",
    "system prompt",
    // FR-04-27's internal terms (unless the study itself uses the word).
    "tool",
    "agent",
    "harness",
    "langgraph",
    // Talk about being an AI agent.
    "as an ai",
    "as a language model",
    "i am an ai",
    "i'm an ai",
    "i\u{2019}m an ai",
    "ai agent",
    "ai language model",
    "language model",
    "as an assistant",
    "as a bot",
    "i am a bot",
    "作为ai",
    "作为一个ai",
    "作为人工智能",
    "我是ai",
    "我是一个ai",
    "我是人工智能",
    "语言模型",
    "调用工具",
    "工具调用",
    "函数调用",
];

/// Why a text may not be shown: the term found (for the log; never the text itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

/// The check for one session's study.
#[derive(Debug, Clone, Default)]
pub struct Visible {
    terms: Vec<String>,
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl Visible {
    /// The fixed terms, those the study's participant-facing text uses taken out, and the
    /// study's own identifiers that look like identifiers (an objective or field id with `_`).
    pub fn for_study(study: &PinnedStudy) -> Self {
        let config = &study.study_config;
        let mut public = format!("{} {}", config.title, config.description);
        for o in &config.objectives {
            public.push_str(&format!(
                " {} {} {}",
                o.title,
                o.opening_question,
                o.probe_hints.join(" ")
            ));
        }
        let public = public.to_ascii_lowercase();
        let mut terms: Vec<String> = TERMS
            .iter()
            .filter(|t| !public.contains(&t.to_ascii_lowercase()))
            .map(|t| t.to_string())
            .collect();
        let ids = config
            .objectives
            .iter()
            .map(|o| o.id.as_str())
            .chain(study.output_schema.fields.iter().map(|f| f.id.as_str()));
        terms.extend(
            ids.filter(|id| id.contains('_') && !public.contains(&id.to_ascii_lowercase()))
                .map(str::to_ascii_lowercase),
        );
        Self { terms }
    }

    /// How many bytes of `text` may be shown now — all of it once `complete`, else all but an
    /// end that could still become a term — or the term that refuses it.
    pub fn check(&self, text: &str, complete: bool) -> Result<usize, Refused> {
        let lower = text.to_ascii_lowercase();
        let bytes = lower.as_bytes();
        let mut safe = text.len();
        for term in &self.terms {
            let t = term.as_bytes();
            let word_start = is_word(t[0]);
            let word_end = is_word(t[t.len() - 1]);
            let starts_ok = |i: usize| !word_start || i == 0 || !is_word(bytes[i - 1]);
            let mut from = 0;
            while let Some(found) = lower[from..].find(term.as_str()) {
                let i = from + found;
                let end = i + t.len();
                from = i + 1;
                if !starts_ok(i) {
                    continue;
                }
                match bytes.get(end) {
                    Some(&next) if word_end && is_word(next) => continue,
                    None if word_end && !complete => safe = safe.min(i),
                    _ => return Err(Refused(term.clone())),
                }
            }
            if !complete {
                // The end of the text may be the beginning of this term.
                for k in (1..t.len()).rev() {
                    if bytes.len() >= k && bytes.ends_with(&t[..k]) && starts_ok(bytes.len() - k) {
                        safe = safe.min(bytes.len() - k);
                        break;
                    }
                }
            }
        }
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
mod tests {
    use super::*;

    fn demo() -> PinnedStudy {
        crate::demo::definition()
            .versioned_documents()
            .pin("s", "demo")
    }

    fn visible() -> Visible {
        let mut study = demo();
        study.study_config.objectives[0].id = "planning_habits".into();
        Visible::for_study(&study)
    }

    /// Feeds `text` a few characters at a time, as a stream would: what was shown before the
    /// check refused (or everything), and the refusal.
    fn stream(v: &Visible, text: &str) -> (String, Option<Refused>) {
        let mut shown = 0;
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        for (n, (i, c)) in chars.iter().enumerate() {
            let end = i + c.len_utf8();
            let complete = n + 1 == chars.len();
            match v.check(&text[..end], complete) {
                Ok(safe) => {
                    assert!(safe >= shown, "the shown text never shrinks");
                    shown = safe;
                }
                Err(r) => return (text[..shown].to_string(), Some(r)),
            }
        }
        (text[..shown].to_string(), None)
    }

    #[test]
    fn plain_questions_pass_whole() {
        let v = visible();
        for text in [
            "How do you usually plan your groceries? Any tools or apps you use?",
            "What would an AI assistant need to do for you?",
            "你平时怎么计划每周买菜？",
            "Could you describe it as an aid to memory?",
        ] {
            assert_eq!(stream(&v, text), (text.to_string(), None), "{text}");
        }
    }

    #[test]
    fn internal_talk_is_refused_before_it_shows() {
        let v = visible();
        for (text, term) in [
            (
                "As an AI agent I will now call the ask_question tool: {}",
                "as an ai",
            ),
            ("Thanks! I will call ask_question now.", "ask_question"),
            ("Great. {\"objective_id\": \"x\"}", "{"),
            ("<think>the user is vague</think>So?", "<think"),
            ("Let me ask about planning_habits next.", "planning_habits"),
            ("作为人工智能，我想问你", "作为人工智能"),
            ("My rationale: they were vague.", "rationale"),
        ] {
            let (shown, refused) = stream(&v, text);
            assert_eq!(refused, Some(Refused(term.into())), "{text}");
            // Not even the term's beginning was shown.
            let n = term.chars().count();
            let head: String = term.chars().take((n - 1).max(1)).collect();
            assert!(
                !shown.to_ascii_lowercase().contains(&head),
                "{text}: {shown}"
            );
        }
    }

    #[test]
    fn the_hold_back_is_only_what_a_term_could_start() {
        let v = visible();
        assert_eq!(
            v.check("Tell me more about it. As an", false),
            Ok("Tell me more about it. ".len())
        );
        assert_eq!(
            v.check("Tell me more about it", false),
            Ok("Tell me more about it".len())
        );
    }

    #[test]
    fn a_study_about_the_topic_may_say_its_words() {
        let mut study = demo();
        study.study_config.description = "How people use each AI agent they try.".into();
        let v = Visible::for_study(&study);
        assert_eq!(v.refuses("Which AI agent did you try first?"), None);
        assert!(visible()
            .refuses("Which AI agent did you try first?")
            .is_some());
    }
}
