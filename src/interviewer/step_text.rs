//! The text of a model's complete proposal, checked whole before a participant reads it: what
//! `crate::llm::visible` refuses in any of its texts (message, summary, a widget it writes), and
//! a summary that says nothing.

use interview_session::decision::{AgentAction, Proposal};

use crate::llm::visible::{Refused, Visible};

/// The text of a complete proposal that a participant would read, checked whole.
pub(super) fn refused_text(visible: &Visible, p: &Proposal) -> Option<Refused> {
    let mut texts: Vec<&str> = p
        .message
        .iter()
        .chain(p.summary.iter())
        .map(String::as_str)
        .collect();
    // A widget the model writes is read whole: its question, its choices, its scale's labels,
    // and its research intent (which travels to the client with it).
    if let Some(spec) = &p.interaction {
        texts.extend(crate::llm::leaks::widget_texts(spec));
        texts.push(&spec.research_intent);
    }
    texts
        .into_iter()
        .find_map(|t| visible.refuses(t))
        .or_else(|| unfinished_message(p))
        .or_else(|| super::said::out_of_manner(p))
        .or_else(|| empty_summary(p))
        .or_else(|| {
            p.message
                .iter()
                .chain(p.summary.iter())
                .find_map(|t| not_words(t))
        })
}

/// The characters a whole message may end with, by what the step does: a question asked or
/// probed ends with a question mark (the participant sees at once that a reply is wanted, and
/// "refused, skipped, requested to stop shopping." — seen from a 135M model as a probe — is no
/// question); a closing ends as a statement; a widget's lead-in or a summary with any sentence
/// end, or a closing bracket or quote after one. `tools.json` gives each tool's `message` the
/// same endings in its `pattern`, so a grammar server cannot end it otherwise (a unit test there
/// holds the two together).
pub(super) fn message_endings(action: &AgentAction) -> &'static [char] {
    const QUESTION: &[char] = &['?', '？'];
    const STATEMENT: &[char] = &['.', '!', '。', '！', ')', '）', '"', '”'];
    const ANY: &[char] = &['.', '?', '!', '。', '？', '！', ')', '）', '"', '”'];
    match action {
        AgentAction::AskQuestion { .. } | AgentAction::Probe { .. } => QUESTION,
        AgentAction::Conclude { .. } => STATEMENT,
        AgentAction::RenderInteraction { .. }
        | AgentAction::SummarizeAndConfirm
        | AgentAction::ExtractFields => ANY,
    }
}

/// A message a participant reads is words that end as a sentence ends: "3.140952786-1" and "]["
/// (seen from a 135M model) are no question, and a message cut at a schema's length bound ends
/// mid-word — the participant would read a broken-off utterance. Fewer than two letters, or a
/// last character that ends no sentence of its kind ([`message_endings`]), and the message is
/// refused; the rules' step speaks.
fn unfinished_message(p: &Proposal) -> Option<Refused> {
    let text = p.message.as_deref()?.trim_end();
    if text.is_empty() {
        return None;
    }
    if letter_weight(text) < 2 {
        return Some(Refused("a message with no words".into()));
    }
    (!text.ends_with(message_endings(&p.action)))
        .then(|| Refused("a message that does not end as its kind of sentence ends".into()))
}

/// Letters in `text`, a CJK character counting as three (it carries about a word).
fn letter_weight(text: &str) -> usize {
    text.chars()
        .map(|c| match c {
            c if super::said::is_cjk(c) => 3,
            c if c.is_alphabetic() => 1,
            _ => 0,
        })
        .sum()
}

/// A summary the participant is asked to confirm must say something: "./summary" (seen from a
/// 135M model) would be confirmed as what the interview learned. Under about fifteen letters
/// (a CJK character counting as three) it is refused, and the rules' summary, built from what
/// was recorded, is proposed instead. No text at all is not refused: the runtime then writes
/// the summary itself.
fn empty_summary(p: &Proposal) -> Option<Refused> {
    if p.action != AgentAction::SummarizeAndConfirm {
        return None;
    }
    let text = p.summary.as_deref().or(p.message.as_deref())?;
    let weight = letter_weight(text);
    (weight > 0 && weight < 15)
        .then(|| Refused("a summary too short to say what was learned".into()))
}

/// What a small model writes when it has lost the thread reads as no sentence: a path, a
/// version string or a lower-case word first ("./pickup.json: …", "1.3.6.0.9875.24.12-v1.x…",
/// "the last step is about to end, you can choose another one now."), letters run together
/// for a line ("…squaresquarerolloverdownloaded…"), or mostly digits and punctuation ("4.3,
/// 6.7, 9.8"); a link is never the model's to send (a participant may follow it). Each was seen
/// from SmolLM2-135M and would otherwise have been shown. A text refused here is replaced by the
/// rules' step, as any refused text is.
fn not_words(text: &str) -> Option<Refused> {
    if let Some(refused) = refused_start(text) {
        return Some(refused);
    }
    if super::said::over_and_over(text) {
        return Some(Refused("the same words over and over".into()));
    }
    let shown: Vec<char> = text.chars().filter(|c| !c.is_whitespace()).collect();
    let letters = shown.iter().filter(|c| c.is_alphabetic()).count();
    (letters * 10 < shown.len() * 6)
        .then(|| Refused("a text mostly of digits and punctuation".into()))
}

/// The part of [`not_words`] that a beginning already decides, whatever follows: how the text
/// begins, a link, letters run together. Checked on a message while it streams, so none of it
/// is shown first.
pub(super) fn refused_start(text: &str) -> Option<Refused> {
    let text = text.trim_start();
    let first = text.chars().next()?;
    let opens = first.is_alphabetic() && !first.is_lowercase();
    if !(opens || "\"“'‘(（«¿¡-•".contains(first)) {
        return Some(Refused(
            "a text that does not begin as a sentence begins".into(),
        ));
    }
    let lower = text.to_lowercase();
    let www = lower
        .match_indices("www.")
        .any(|(i, _)| !lower[..i].ends_with(|c: char| c.is_alphanumeric()));
    if lower.contains("://") || www {
        return Some(Refused("a link".into()));
    }
    let mut run = 0;
    for c in text.chars() {
        run = if c.is_ascii_alphabetic() { run + 1 } else { 0 };
        if run > LONGEST_WORD {
            return Some(Refused("letters run together past any word".into()));
        }
    }
    None
}

/// Letters in a row past which no word goes ("internationalization" has 20, German compounds
/// rarely pass 30).
const LONGEST_WORD: usize = 30;

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use interview_session::decision::Provenance;

    /// A widget proposal with a lead-in, for the checks' tests (here and in `said.rs`).
    pub(in crate::interviewer) fn proposal(interaction: serde_json::Value) -> Proposal {
        Proposal {
            action: AgentAction::RenderInteraction {
                objective_id: Some("pain_points".into()),
            },
            rationale: "r".into(),
            message: Some("One more question.".into()),
            interaction: Some(serde_json::from_value(interaction).unwrap()),
            fields: Vec::new(),
            summary: None,
            input_summary: String::new(),
            provenance: Provenance {
                model: "m".into(),
                prompt_version_id: "p".into(),
                latency_ms: 0,
                token_usage: Default::default(),
            },
            input_class: None,
            refused: None,
        }
    }

    #[test]
    fn a_widget_the_model_writes_is_checked_whole() {
        let study = crate::demo::definition()
            .versioned_documents()
            .pin("s", "demo");
        let visible = Visible::for_study(&study);
        let fine = serde_json::json!({"type": "single_choice", "prompt": "Which first?", "research_intent": "first pick",
            "options": [{"id": "a", "label": "Meal ideas"}, {"id": "b", "label": "A shopping list"}]});
        assert_eq!(refused_text(&visible, &proposal(fine)), None);
        for bad in [
            serde_json::json!({"type": "single_choice", "prompt": "Which first?", "research_intent": "x",
                "options": [{"id": "a", "label": "{\"tool\": 1}"}, {"id": "b", "label": "B"}]}),
            serde_json::json!({"type": "likert", "prompt": "How much?", "research_intent": "x", "scale": 3,
                "labels": ["As an AI I think", "meh", "yes"]}),
            serde_json::json!({"type": "yes_no", "prompt": "Ok?", "research_intent": "probe_hint for the agent"}),
        ] {
            assert!(
                refused_text(&visible, &proposal(bad.clone())).is_some(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_message_is_words_that_end_as_a_sentence_ends() {
        let ask = |text: &str| Proposal {
            action: AgentAction::AskQuestion {
                objective_id: "planning_habits".into(),
            },
            message: Some(text.into()),
            interaction: None,
            ..proposal(serde_json::json!({"type": "yes_no", "prompt": "p", "research_intent": "r"}))
        };
        for bad in [
            "3.140952786-1",
            "][",
            "{",
            "?",
            "How do you plan your groceries",
            "Tell me more.",
            "refused, skipped, requested to stop shopping for groceries on weekdays.",
        ] {
            assert!(unfinished_message(&ask(bad)).is_some(), "{bad}");
        }
        for fine in [
            "How do you plan your groceries?",
            "你平时怎么计划买菜？",
            "You said \"a list\" — what goes on it?",
        ] {
            assert_eq!(unfinished_message(&ask(fine)), None, "{fine}");
        }
        // A closing is a statement; a widget's lead-in any sentence.
        let close = |text: &str| Proposal {
            action: AgentAction::Conclude {
                reason: interview_session::decision::ConcludeReason::AllMustObjectivesCovered,
            },
            ..ask(text)
        };
        assert_eq!(unfinished_message(&close("Thank you!")), None);
        assert_eq!(unfinished_message(&close("You said \"a list.\"")), None);
        assert!(unfinished_message(&close("Anything else?")).is_some());
        assert_eq!(
            unfinished_message(&Proposal {
                message: Some("Tell me more.".into()),
                ..proposal(
                    serde_json::json!({"type": "yes_no", "prompt": "p", "research_intent": "r"})
                )
            }),
            None
        );
    }

    #[test]
    fn each_tool_schema_ends_its_message_as_the_check_does() {
        use interview_session::decision::{ConcludeReason, ProbeTrigger};
        let tools: serde_json::Value = serde_json::from_str(crate::llm::schemas::TOOLS).unwrap();
        let action_of = |tool: &str| match tool {
            "ask_question" => AgentAction::AskQuestion {
                objective_id: "o".into(),
            },
            "probe" => AgentAction::Probe {
                objective_id: "o".into(),
                based_on_turn_id: None,
                trigger: ProbeTrigger::Vague,
            },
            "render_interaction" => AgentAction::RenderInteraction { objective_id: None },
            "summarize_and_confirm" => AgentAction::SummarizeAndConfirm,
            "conclude" => AgentAction::Conclude {
                reason: ConcludeReason::ParticipantRequestedEnd,
            },
            other => panic!("{other} has a message: give it its action here"),
        };
        let mut checked = 0;
        for tool in tools.as_array().unwrap() {
            let name = tool["function"]["name"].as_str().unwrap();
            let message = &tool["function"]["parameters"]["properties"]["message"];
            let Some(pattern) = message["pattern"].as_str() else {
                assert!(message.is_null(), "{name}: a message without a pattern");
                continue;
            };
            // `^[first][text]{0,498}[endings]$`: the last class is the endings.
            let endings = &pattern[pattern.rfind('[').unwrap() + 1..pattern.len() - 2];
            let mut sent: Vec<char> = endings.chars().collect();
            sent.sort_unstable();
            // A plain `"` cannot end a message in a grammar: the grammar's class is raw JSON
            // text, where it would close the string. The check still accepts it.
            let mut checked_ends: Vec<char> = message_endings(&action_of(name))
                .iter()
                .copied()
                .filter(|c| *c != '"')
                .collect();
            checked_ends.sort_unstable();
            assert_eq!(sent, checked_ends, "{name}");
            // A message begins as a sentence begins (no path, number, punctuation or lower-case
            // letter first) and holds no JSON, markup, code, identifier or HTML entity (`&#34;`, which llama-cpp-python's
            // chat template turns the prompt's quotes into and a small model copies).
            let text = r#"[^"\\_{}<>&`\x00-\x1F"#;
            let first = r#" .,:;/*#|0-9a-z\[\]'+=$%@!?)-]"#;
            assert!(
                pattern.starts_with(&format!("^{text}{first}{text}]{{0,498}}[")),
                "{name}: {pattern}"
            );
            checked += 1;
        }
        assert_eq!(checked, 5);
    }

    #[test]
    fn a_text_that_is_no_words_is_refused() {
        for bad in [
            "./pickup.json: The most frustrating part is that vegetables go off?",
            "1.3.6.0.9875.24.12-v1.x.zfabbcccdeaadffdceeefgjhkqwlllw, roll?",
            "Anything else to add about squaresquaresquarerolloverdownloadedrolled?",
            "Ok 4.3, 6.7, 9.8, 12.3, 15.5, 19.3, 22.5?",
            "Could you look at https://example.com and tell me?",
            "Could you look at www.example.com and tell me?",
            ", what do you plan?",
            "the last step is about to end, you can choose another one now.",
            "][0].text.trim() + 'You want to know what you should plan?'",
            "Your summary is: Your summary is: Your summary is: Your summary is: Your summary is:",
        ] {
            assert!(not_words(bad).is_some(), "{bad}");
        }
        for fine in [
            "How do you plan your groceries?",
            "你平时怎么计划买菜？",
            "\"A list,\" you said — what goes on it?",
            "On a scale of 1 to 5, how easy is it?",
            "- Planning: a list on the phone; every Sunday\n- Frustration: vegetables go off",
            "(Take your time.) What comes first?",
            "Awww. What happened then?",
        ] {
            assert_eq!(not_words(fine), None, "{fine}");
        }
    }

    #[test]
    fn a_summary_that_says_nothing_is_refused() {
        let summary = |text: &str| Proposal {
            action: AgentAction::SummarizeAndConfirm,
            message: Some(text.into()),
            interaction: None,
            ..proposal(serde_json::json!({"type": "yes_no", "prompt": "p", "research_intent": "r"}))
        };
        assert!(empty_summary(&summary("./summary")).is_some());
        assert!(empty_summary(&summary("Ok.")).is_some());
        for fine in [
            "You plan with a list and hate wasted food. Is that right?",
            "你用清单计划购物，最烦蔬菜放坏。对吗？",
        ] {
            assert_eq!(empty_summary(&summary(fine)), None, "{fine}");
        }
        // A question is no summary, whatever its length.
        let mut ask = summary("Ok?");
        ask.action = AgentAction::AskQuestion {
            objective_id: "o".into(),
        };
        assert_eq!(empty_summary(&ask), None);
    }
}
