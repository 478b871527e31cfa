//! A summary says what the participant said. The participant is asked to confirm it as what the
//! interview learned, so a summary about something else is refused whatever its form:
//! SmolLM2-135M on a real server offered "Maximum number of responses allowed is 10 (2),
//! max-turns-reached=3" and "The summary you requested is not available at this time." as
//! summaries — sentences, no internal term, no JSON, and nothing the participant ever said. A
//! refused summary costs the model its words, not its decision (`reworded.rs`): the runtime's
//! summary ([`runtime_summary`]) is shown instead.
//!
//! The check is by words, without a model. A summary's content words — distinct words of four
//! letters or more outside a list of the words any summary is framed in, and Chinese characters
//! outside a list of function characters — must mostly (more than half) have been said by the
//! participant: in their messages, or shown to them in a widget they answered. Words match on
//! their beginnings, so "shopping" is founded on "shop" and "vegetables" on "vegetable"; a
//! number must have been said as it is. The words presenting the summary may also use the
//! interviewer's and the study's words, and are refused only for two or more words never said
//! that outnumber the ones said ("The summary you requested is not available."): "Great! Here
//! is what I noted:" passes. A capable model's paraphrase keeps most of the participant's words
//! and passes; a summary in none of them does not. Japanese kana carry no content here (a
//! summary mostly in kana is judged by its kanji), so a check of a Japanese summary is weaker.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use interview_session::decision::{AgentAction, ExtractedField, Proposal};
use interview_session::events::{EventBody, SessionEvent};
use interview_session::study::FieldType;
use interview_session::Session;

use crate::llm::visible::Refused;
use interview_session::conversation::Conversation;

/// The summary the runtime asks the participant to confirm: what was recorded and, for a field
/// nothing was recorded for yet, what the rules copier makes of the answers. In `llm` mode a
/// field waits for the model's extraction, which a small model often fails and a
/// one-at-a-time endpoint leaves to the final extraction: without the copier a whole
/// interview would be summed up as "we did not get to talk about much". A recorded text value
/// resting on their messages, in more words they never said than words they said, is
/// summarised from their answers instead (the final extraction, after the interview, records
/// the fields anew).
pub(super) fn runtime_summary(session: &Session, conversation: &Conversation) -> String {
    let Some(study) = session.study() else {
        return String::new();
    };
    let mut said = Said::default();
    for answer in &conversation.answers {
        said.add(&answer.content);
    }
    let replies = conversation.last_message.iter().map(|(_, t)| t);
    for text in replies.chain(conversation.unclassified_summary_reply.iter()) {
        said.add(text);
    }
    let text_field = |id: &str| is_text_field(study, id);
    // A widget's answer fills its fields in the words the widget showed, as the rules take
    // it: only what rests on the participant's messages is checked.
    let widget_turns: HashSet<uuid::Uuid> = conversation
        .answers
        .iter()
        .filter(|a| a.widget.is_some())
        .map(|a| a.turn_id)
        .collect();
    let unrecognised: BTreeMap<&String, &serde_json::Value> = session
        .fields()
        .iter()
        .filter(|(id, f)| {
            text_field(id) && !f.evidence_turn_ids.iter().any(|t| widget_turns.contains(t))
        })
        .filter_map(|(id, f)| Some((id, f.value.as_str()?, &f.value)))
        .filter(|(_, text, _)| !founded(text, &said, Kind::Value))
        .map(|(id, _, value)| (id, value))
        .collect();
    let mut fields: BTreeMap<_, _> = session
        .fields()
        .iter()
        .filter(|(id, _)| !unrecognised.contains_key(id))
        .map(|(id, f)| (id.clone(), f.clone()))
        .collect();
    // The copier keeps a recorded field whose evidence is a reply to the summary: not an
    // unrecognised one.
    for f in super::rules_fields::extract_all(session, conversation) {
        if unrecognised.get(&f.field_id) != Some(&&f.value) {
            fields.entry(f.field_id.clone()).or_insert(f);
        }
    }
    session.summary_of(&fields)
}

/// Takes out of a model's `fields` the text values mostly in words the participant never said
/// (a 135M model's final extraction gave a frustration field "your-best-friend's, daily grocery
/// shopping plan &#40;(pick your favorite) is a game of…", type-valid, citing an answer); their
/// ids, for the rules copier to fill from the answers.
pub(super) fn take_unfounded(
    fields: &mut Vec<ExtractedField>,
    session: &Session,
    events: &[SessionEvent],
) -> Vec<String> {
    let Some(study) = session.study() else {
        return Vec::new();
    };
    let (participant, _) = said_in_the_interview(session, events);
    let text_field = |id: &str| is_text_field(study, id);
    let mut taken = Vec::new();
    fields.retain(|f| {
        let unfounded = text_field(&f.field_id)
            && f.value
                .as_str()
                .is_some_and(|text| !founded(text, &participant, Kind::Value));
        if unfounded {
            taken.push(f.field_id.clone());
        }
        !unfounded
    });
    taken
}

/// Whether `id` is a free-text output field of `study` (the values the checks here read).
fn is_text_field(study: &interview_session::study::PinnedStudy, id: &str) -> bool {
    let fields = &study.output_schema.fields;
    fields
        .iter()
        .any(|f| f.id == id && f.field_type == FieldType::String)
}

/// Refuses the summary of a `summarize_and_confirm` proposal when most of it was never said by
/// the participant, and the words presenting it when they are about something else.
pub(super) fn unfounded_summary(
    p: &Proposal,
    session: &Session,
    events: &[SessionEvent],
) -> Option<Refused> {
    if p.action != AgentAction::SummarizeAndConfirm {
        return None;
    }
    let (participant, everyone) = said_in_the_interview(session, events);
    let summary = p
        .summary
        .as_deref()
        .filter(|s| !founded(s, &participant, Kind::Summary));
    let message = p
        .message
        .as_deref()
        .filter(|m| !founded(m, &everyone, Kind::Presenting));
    (summary.is_some() || message.is_some())
        .then(|| Refused("a summary of things never said".into()))
}

/// What a text is held to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A summary: it says something (two things said at least), mostly in words the
    /// participant said.
    Summary,
    /// A recorded value: no more of it in words never said than in words said.
    Value,
    /// The words presenting a summary: framing, not a statement about something else.
    Presenting,
}

fn founded(text: &str, said: &Said, kind: Kind) -> bool {
    let words: BTreeSet<String> = content_words(text).into_iter().collect();
    let known = words.iter().filter(|w| said.knows(w)).count();
    let unknown = words.len() - known;
    let numbers_said = numbers(text).all(|n| said.numbers.contains(&n));
    match kind {
        Kind::Summary => known >= 2 && known > unknown && numbers_said,
        Kind::Value => known >= unknown && numbers_said,
        Kind::Presenting => unknown < 2 || known >= unknown,
    }
}

/// What the participant said (their messages, and the widgets they answered: question, labels
/// and answer), and that with what the interviewer and the study said.
fn said_in_the_interview(session: &Session, events: &[SessionEvent]) -> (Said, Said) {
    let (mut participant, mut interviewer) = (Vec::new(), Vec::new());
    let mut shown = None;
    for e in events {
        match &e.body {
            EventBody::ParticipantMessageCreated { content, .. } => {
                participant.push(content.clone())
            }
            EventBody::AgentMessageCompleted { content, .. } => interviewer.push(content.clone()),
            EventBody::InteractionRendered { interaction } => {
                shown = interaction.objective_id.is_some().then(|| {
                    let texts =
                        crate::llm::leaks::shown_texts(&interaction.prompt, &interaction.kind);
                    texts.into_iter().map(String::from).collect::<Vec<_>>()
                });
            }
            // A widget answered: what it asked and offered, and the answer (its option ids
            // as words). A skipped one says nothing.
            EventBody::InteractionSubmitted { value, .. } => {
                if let (Some(texts), Some(value)) = (shown.take(), value) {
                    participant.extend(texts);
                    participant.push(value.to_string().replace('_', " "));
                }
            }
            _ => {}
        }
    }
    if let Some(study) = session.study() {
        for o in &study.study_config.objectives {
            interviewer.extend([o.title.clone(), o.opening_question.clone()]);
        }
    }
    let mut said = Said::default();
    participant.iter().for_each(|t| said.add(t));
    let participant_only = said.clone();
    interviewer.iter().for_each(|t| said.add(t));
    (participant_only, said)
}

/// What was said: its words' beginnings, its CJK characters and its numbers. Two words match
/// when they share their first five letters, or four when either has only four ("shop" and
/// "shopping", "queue" and "queues").
#[derive(Default, Clone)]
struct Said {
    first_five: HashSet<String>,
    first_four: HashSet<String>,
    four_letter_words: HashSet<String>,
    characters: HashSet<char>,
    numbers: HashSet<String>,
}

impl Said {
    fn add(&mut self, text: &str) {
        self.numbers.extend(numbers(text));
        for word in content_words(text) {
            let letters: Vec<char> = word.chars().collect();
            match letters.as_slice() {
                [c] => {
                    self.characters.insert(*c);
                }
                [a, b, c, d] => {
                    self.first_four.insert([a, b, c, d].into_iter().collect());
                    self.four_letter_words
                        .insert([a, b, c, d].into_iter().collect());
                }
                [a, b, c, d, e, ..] => {
                    self.first_four.insert([a, b, c, d].into_iter().collect());
                    self.first_five
                        .insert([a, b, c, d, e].into_iter().collect());
                }
                _ => {}
            }
        }
    }

    fn knows(&self, word: &str) -> bool {
        let letters: Vec<char> = word.chars().collect();
        match letters.as_slice() {
            [c] => self.characters.contains(c),
            [a, b, c, d] => self
                .first_four
                .contains(&[a, b, c, d].into_iter().collect::<String>()),
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

/// The words of `text` that carry its content, letters only: words of four letters or more
/// that are not [`FRAME_WORDS`], and Han characters and Hangul syllables that are not
/// [`FRAME_CHARACTERS`] (kana mostly carry grammar).
fn content_words(text: &str) -> Vec<String> {
    super::said::words(text)
        .into_iter()
        .filter_map(|w| {
            let mut chars = w.chars();
            if let (Some(c), None) = (chars.next(), chars.next()) {
                let han = matches!(c, '\u{3400}'..='\u{9fff}' | '\u{f900}'..='\u{faff}');
                let hangul = matches!(c, '\u{ac00}'..='\u{d7af}');
                return ((han || hangul) && !FRAME_CHARACTERS.contains(c)).then_some(w);
            }
            let letters: String = w.chars().filter(|c| c.is_alphabetic()).collect();
            let framing = FRAME_WORDS.contains(&w.as_str())
                || FRAME_WORDS.contains(&w.trim_end_matches("'s"))
                || FRAME_WORDS.contains(&letters.as_str());
            (letters.chars().count() >= 4 && !framing).then_some(letters)
        })
        .collect()
}

/// The numbers in `text`, as written ("10", "2.5").
fn numbers(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|n| n.trim_matches('.'))
        .filter(|n| n.chars().any(|c| c.is_ascii_digit()))
        .map(String::from)
}

/// Words any summary is framed in, whatever was said: evidence of neither kind.
const FRAME_WORDS: &[&str] = &[
    "about",
    "accurate",
    "accurately",
    "also",
    "anything",
    "before",
    "below",
    "capture",
    "captured",
    "check",
    "confirm",
    "correct",
    "correctly",
    "does",
    "else",
    "everything",
    "following",
    "from",
    "good",
    "great",
    "have",
    "here",
    "heard",
    "into",
    "just",
    "know",
    "let's",
    "lets",
    "like",
    "look",
    "looks",
    "main",
    "make",
    "mentioned",
    "missed",
    "missing",
    "more",
    "most",
    "mostly",
    "much",
    "note",
    "noted",
    "notes",
    "okay",
    "overall",
    "please",
    "points",
    "quick",
    "really",
    "recap",
    "right",
    "said",
    "share",
    "shared",
    "sharing",
    "some",
    "sound",
    "sounds",
    "summarise",
    "summarised",
    "summarize",
    "summarized",
    "summary",
    "sure",
    "tell",
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
    "time",
    "told",
    "understand",
    "understanding",
    "understood",
    "very",
    "want",
    "well",
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

/// Chinese characters any sentence is built with, and a summary framed in ("总结一下", "谢谢你的
/// 分享"): evidence of neither kind.
const FRAME_CHARACTERS: &str =
    "的了你我他她是在有和也都就这那一个们吗呢吧啊说很还要会到对不没么什样总结下谢分享内容以上得把被给让与及其如果请";

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
    fn a_summary_says_what_the_participant_said() {
        let answers = said(&[
            "I shop twice a week at Lidl, and the queues are long and frustrating.",
            "Mostly vegetables, salad leaves especially. About 20 euros a week goes in the bin.",
        ]);
        for fine in [
            "You shop twice a week, mostly at Lidl; the long queues frustrate you; salad leaves and other vegetables go off first.",
            "- Shopping: twice a week at Lidl\n- Waste: vegetables, about 20 euros a week",
        ] {
            assert!(founded(fine, &answers, Kind::Summary), "{fine}");
        }
        for junk in [
            "Maximum number of responses allowed is 10 (2), max-turns-reached=3.",
            "The summary you requested is not available at this time.",
            "Your summary is ready.",
            "Here is the summary: shopping.",
            // Known words said over and over do not carry unknown ones.
            "Vegetables, vegetables, vegetables. You were abducted by aliens from Mars.",
            // A number never said is made up.
            "You shop twice a week at Lidl and spend 500 euros.",
        ] {
            assert!(!founded(junk, &answers, Kind::Summary), "{junk}");
        }
        let zh = said(&["我每周去两次超市，蔬菜经常放坏。"]);
        assert!(founded(
            "你每周去两次超市，蔬菜常常放坏。",
            &zh,
            Kind::Summary
        ));
        assert!(!founded("最大回复数量已达到上限。", &zh, Kind::Summary));
    }

    #[test]
    fn the_words_presenting_a_summary_may_be_framing() {
        let everyone = said(&["How do you usually plan your grocery shopping?", "At Lidl."]);
        for fine in [
            "Here is what I noted.",
            "Great! Here's a summary:",
            "Okay, here is what I noted.",
            "Thank you for your time! Let me recap:",
            "Does this capture it accurately?",
            "Let's make sure I got this right:",
            "我来总结一下：",
        ] {
            assert!(founded(fine, &everyone, Kind::Presenting), "{fine}");
        }
        assert!(!founded(
            "The summary you requested is not available.",
            &everyone,
            Kind::Presenting
        ));
    }

    #[test]
    fn a_recorded_value_is_mostly_in_the_participant_s_words() {
        let answers = said(&["I keep a list on the fridge that my partner and I fill in."]);
        assert!(founded(
            "a shared list on the fridge",
            &answers,
            Kind::Value
        ));
        assert!(founded("yes", &answers, Kind::Value));
        assert!(!founded(
            "Responses allowed per session",
            &answers,
            Kind::Value
        ));
    }
}
