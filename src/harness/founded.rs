//! A summary the model writes says what the participant said. The participant is asked to
//! confirm it as what the interview learned, so a text about something else is refused
//! whatever its form: SmolLM2-135M on a real server offered "Maximum number of responses
//! allowed is 10 (2), max-turns-reached=3" and "The summary you requested is not available at
//! this time." as summaries — sentences, no internal term, no JSON, and nothing the participant
//! ever said. A refused summary costs the model its words, not its decision (`reworded.rs`):
//! the runtime's summary, built from what was recorded, is shown instead.
//!
//! The check is by words, without a model: most of a summary's content words (four letters or
//! more, outside a short list of the words any summary is framed in) must have been said in the
//! interview — by the participant, by the interviewer, or in the study's questions and widgets
//! — matched on their beginnings, so "shopping" is founded on "shop" and "vegetables"
//! on "vegetable". CJK text is matched character by character. A paraphrase by a capable model
//! keeps most of the participant's own words and passes; a summary in none of them does not.
//!
//! The runtime's own summary ([`runtime_summary`]) is held to the same: it is written from the
//! recorded fields, and a model-extracted text value the participant would not recognise as
//! theirs gives way to what their answers say.

use std::collections::{BTreeMap, HashSet};

use interview_session::decision::{AgentAction, Proposal};
use interview_session::events::{EventBody, SessionEvent};
use interview_session::study::FieldType;
use interview_session::Session;

use super::conversation::Conversation;
use crate::llm::visible::{Refused, Visible};

/// The summary the runtime asks the participant to confirm: what was recorded and, for a field
/// nothing was recorded for yet, what the rules copier makes of the answers. In `llm` mode a
/// field waits for the model's extraction, which a small model often fails and a
/// one-at-a-time endpoint leaves to the final extraction: without the copier a whole
/// interview would be summed up as "we did not get to talk about much". A recorded text value
/// with words the participant may not read, or mostly words they never said, is left to the
/// copier too. (In `rules` mode every answer was extracted already, in the participant's
/// words.)
pub(super) fn runtime_summary(session: &Session, conversation: &Conversation) -> String {
    let Some(study) = session.study() else {
        return String::new();
    };
    let visible = Visible::for_study(study);
    let mut said = Said::default();
    for answer in &conversation.answers {
        said.add(&answer.content);
    }
    for (_, text) in conversation.last_message.iter() {
        said.add(text);
    }
    let recognised = |id: &String, value: &serde_json::Value| {
        let text_field = study
            .output_schema
            .fields
            .iter()
            .any(|f| &f.id == id && f.field_type == FieldType::String);
        match value.as_str() {
            Some(text) if text_field => {
                visible.refuses(text).is_none() && founded(text, &said, false)
            }
            _ => true,
        }
    };
    let mut fields: BTreeMap<_, _> = session
        .fields()
        .iter()
        .filter(|(id, f)| recognised(id, &f.value))
        .map(|(id, f)| (id.clone(), f.clone()))
        .collect();
    for f in super::rules::extract_all(session, conversation) {
        fields.entry(f.field_id.clone()).or_insert(f);
    }
    session.summary_of(&fields)
}

/// Refuses the summary of a `summarize_and_confirm` proposal, and the words that present it,
/// when most of what they say was never said in the interview.
pub(super) fn unfounded_summary(
    p: &Proposal,
    session: &Session,
    events: &[SessionEvent],
) -> Option<Refused> {
    if p.action != AgentAction::SummarizeAndConfirm {
        return None;
    }
    let said = said_in_the_interview(session, events);
    if let Some(summary) = p.summary.as_deref() {
        // A summary must say something the participant can recognise.
        if !founded(summary, &said, true) {
            return Some(Refused("a summary of things never said".into()));
        }
    }
    // The words that present it may be only framing ("Here is what I noted."), but not a
    // statement about something else ("The summary you requested is not available.").
    let message = p.message.as_deref()?;
    (!founded(message, &said, false)).then(|| Refused("a summary of things never said".into()))
}

/// Whether most of `text`'s content words were said; a text with no content word is founded
/// only when `must_say_something` is false.
fn founded(text: &str, said: &Said, must_say_something: bool) -> bool {
    let (mut words, mut known) = (0, 0);
    for word in content_words(text) {
        words += 1;
        known += usize::from(said.knows(&word));
    }
    if words == 0 {
        return !must_say_something;
    }
    known * 2 >= words
}

/// What was said in the interview: its words' beginnings and its CJK characters. Two words
/// match when they share their first five letters, or four when either has only four ("shop"
/// and "shopping", "queue" and "queues").
#[derive(Default)]
struct Said {
    first_five: HashSet<String>,
    first_four: HashSet<String>,
    four_letter_words: HashSet<String>,
    characters: HashSet<char>,
}

impl Said {
    fn add(&mut self, text: &str) {
        self.characters
            .extend(text.chars().filter(|c| super::said::is_cjk(*c)));
        for word in content_words(text) {
            let letters: Vec<char> = word.chars().filter(|c| c.is_alphanumeric()).collect();
            if letters.len() < 4 {
                continue;
            }
            self.first_four.insert(letters[..4].iter().collect());
            if letters.len() == 4 {
                self.four_letter_words.insert(letters.iter().collect());
            } else {
                self.first_five.insert(letters[..5].iter().collect());
            }
        }
    }

    fn knows(&self, word: &str) -> bool {
        let letters: Vec<char> = word.chars().filter(|c| c.is_alphanumeric()).collect();
        match letters.as_slice() {
            [c] if super::said::is_cjk(*c) => self.characters.contains(c),
            four @ [_, _, _, _] => self.first_four.contains(&four.iter().collect::<String>()),
            [a, b, c, d, e, ..] => {
                self.first_five
                    .contains(&[a, b, c, d, e].into_iter().collect::<String>())
                    || self
                        .four_letter_words
                        .contains(&[a, b, c, d].into_iter().collect::<String>())
            }
            _ => false,
        }
    }
}

fn said_in_the_interview(session: &Session, events: &[SessionEvent]) -> Said {
    let mut texts: Vec<String> = Vec::new();
    for e in events {
        match &e.body {
            EventBody::ParticipantMessageCreated { content, .. }
            | EventBody::AgentMessageCompleted { content, .. } => texts.push(content.clone()),
            EventBody::InteractionSubmitted {
                value: Some(value), ..
            } => texts.push(value.to_string().replace('_', " ")),
            _ => {}
        }
    }
    if let Some(study) = session.study() {
        for o in &study.study_config.objectives {
            texts.push(o.title.clone());
            texts.push(o.opening_question.clone());
            texts.extend(o.probe_hints.iter().cloned());
            if let Some(spec) = &o.interaction {
                texts.extend(
                    crate::llm::leaks::widget_texts(spec)
                        .into_iter()
                        .map(String::from),
                );
            }
        }
        let labels = study.output_schema.fields.iter();
        texts.extend(labels.filter_map(|f| f.participant_label.clone()));
    }
    let mut said = Said::default();
    for text in &texts {
        said.add(text);
    }
    said
}

/// The words of `text` that carry its content: CJK characters, and words of four letters or
/// more that are not [`FRAME_WORDS`].
fn content_words(text: &str) -> Vec<String> {
    super::said::words(text)
        .into_iter()
        .filter(|w| {
            let cjk = w.chars().next().is_some_and(super::said::is_cjk);
            cjk || w.chars().filter(|c| c.is_alphabetic()).count() >= 4
                && !FRAME_WORDS.contains(&w.trim_end_matches("'s"))
        })
        .collect()
}

/// Words any summary is framed in, whatever was said: not evidence of either kind.
const FRAME_WORDS: &[&str] = &[
    "about",
    "also",
    "anything",
    "before",
    "captured",
    "check",
    "confirm",
    "correct",
    "correctly",
    "does",
    "everything",
    "from",
    "have",
    "here",
    "heard",
    "into",
    "just",
    "know",
    "let's",
    "like",
    "main",
    "make",
    "mentioned",
    "missed",
    "more",
    "most",
    "mostly",
    "much",
    "note",
    "noted",
    "notes",
    "points",
    "really",
    "right",
    "said",
    "share",
    "shared",
    "sharing",
    "some",
    "sound",
    "sounds",
    "summarise",
    "summarize",
    "summary",
    "sure",
    "thank",
    "thanks",
    "that",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "told",
    "understand",
    "understood",
    "very",
    "want",
    "what",
    "when",
    "where",
    "which",
    "while",
    "with",
    "would",
    "you're",
    "your",
    "yours",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn said(texts: &[&str]) -> Said {
        let mut s = Said::default();
        for t in texts {
            s.add(t);
        }
        s
    }

    #[test]
    fn a_summary_says_what_was_said() {
        let interview = said(&[
            "How do you usually plan your grocery shopping?",
            "I shop twice a week at Lidl, and the queues are long and frustrating.",
            "What goes off before you use it?",
            "Mostly vegetables, salad leaves especially.",
        ]);
        for fine in [
            "You shop twice a week, mostly at Lidl; the long queues frustrate you; salad leaves and other vegetables go off first.",
            "- Planning: shopping twice a week at Lidl\n- Waste: vegetables",
        ] {
            assert!(founded(fine, &interview, true), "{fine}");
        }
        for junk in [
            "Maximum number of responses allowed is 10 (2), max-turns-reached=3.",
            "The summary you requested is not available at this time.",
            "Your summary is ready.",
        ] {
            assert!(!founded(junk, &interview, true), "{junk}");
        }
        // The words presenting a summary may be framing alone.
        assert!(founded("Here is what I noted.", &interview, false));
        assert!(!founded(
            "The summary you requested is not available.",
            &interview,
            false
        ));
        let zh = said(&["你平时怎么计划买菜？", "我每周去两次超市，蔬菜经常放坏。"]);
        assert!(founded("你每周去两次超市，蔬菜常常放坏。", &zh, true));
        assert!(!founded("最大回复数量已达到上限。", &zh, true));
    }
}
