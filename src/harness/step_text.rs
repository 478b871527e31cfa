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
        .or_else(|| empty_summary(p))
}

/// The characters a whole message may end with: a sentence's end, in the scripts the runtime
/// speaks, or a closing bracket or quote after one.
const SENTENCE_ENDS: [char; 10] = ['.', '?', '!', '。', '？', '！', ')', '）', '"', '”'];

/// A message a participant reads is words that end as a sentence ends: "3.140952786-1" and "]["
/// (seen from a 135M model) are no question, and a message cut at a schema's length bound ends
/// mid-word — the participant would read a broken-off utterance. Fewer than two letters, or a
/// last character that ends no sentence, and the message is refused; the rules' step speaks.
fn unfinished_message(p: &Proposal) -> Option<Refused> {
    let text = p.message.as_deref()?.trim_end();
    if text.is_empty() {
        return None;
    }
    if letter_weight(text) < 2 {
        return Some(Refused("a message with no words".into()));
    }
    (!text.ends_with(SENTENCE_ENDS))
        .then(|| Refused("a message that does not end as a sentence ends".into()))
}

/// Letters in `text`, a CJK character counting as three (it carries about a word).
fn letter_weight(text: &str) -> usize {
    text.chars()
        .map(|c| match c {
            '\u{3040}'..='\u{30ff}' | '\u{3400}'..='\u{9fff}' | '\u{ac00}'..='\u{d7af}' => 3,
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

#[cfg(test)]
mod tests {
    use super::*;
    use interview_session::decision::Provenance;

    fn proposal(interaction: serde_json::Value) -> Proposal {
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
        ] {
            assert!(unfinished_message(&ask(bad)).is_some(), "{bad}");
        }
        for fine in [
            "How do you plan your groceries?",
            "Tell me more.",
            "你平时怎么计划买菜？",
            "You said \"a list.\"",
        ] {
            assert_eq!(unfinished_message(&ask(fine)), None, "{fine}");
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
