//! How an interviewer speaks, checked on the model's message: one question at a time and
//! briefly (while it streams, so no more of a broken message is shown), not over and over, and
//! in words not said before — neither its own earlier messages again nor the participant's
//! answer sent back (once it is whole). Each rule answers what
//! SmolLM2-135M did on a real server (`docs/llm-contract.md`, "What the participant reads");
//! what a refusal costs is the model's words, not its decision, when the guards take the
//! decision as proposed (`reworded.rs`).

use interview_session::decision::{AgentAction, Proposal};
use interview_session::events::{EventBody, SessionEvent};

use crate::llm::visible::Refused;

/// A message out of an interviewer's manner: more than one question at a time, a question in a
/// closing, or longer than a participant reads at once. (Words from the wrong side of the
/// interview — "You asked me to…", "Your response is too long" — are refused with the internal
/// terms, `crate::llm::visible`, so they are held back while they stream.)
pub(super) fn out_of_manner(p: &Proposal) -> Option<Refused> {
    manner_so_far(&p.action, p.message.as_deref()?)
}

/// [`out_of_manner`] on the part of a message streamed so far: each rule, once broken, stays
/// broken as more text comes, so the rest of it is never shown.
pub(super) fn manner_so_far(action: &AgentAction, text: &str) -> Option<Refused> {
    let limit = match action {
        // One question at a time, as interview guides teach: "What did you plan? The question
        // you asked yourself last week…?" (seen) is two, and a run-on. A short question before
        // it ("Really? What happened then?", "是吗？后来呢？") is a reaction, not a question.
        AgentAction::AskQuestion { .. }
        | AgentAction::Probe { .. }
        | AgentAction::RenderInteraction { .. } => {
            let mut asked: Vec<&str> = text.split_inclusive(['?', '？']).collect();
            if !asked.last().is_some_and(|q| q.ends_with(['?', '？'])) {
                asked.pop(); // the text after the last question mark
            }
            asked.pop(); // the question itself
            if asked.iter().any(|q| word_weight(q) > REACTION_WORDS) {
                return Some(Refused("more than one question at a time".into()));
            }
            MOST_WORDS_ASKED
        }
        AgentAction::Conclude { .. } => {
            if text.contains(['?', '？']) {
                return Some(Refused("a question in a closing".into()));
            }
            MOST_WORDS_SAID
        }
        // The summary's message carries the summary itself; its length is the summary's.
        AgentAction::SummarizeAndConfirm | AgentAction::ExtractFields => usize::MAX,
    };
    (word_weight(text) > limit).then(|| Refused("a message longer than one reads at once".into()))
}

/// Words a question, a probe or a widget's lead-in may run to: an interviewer's question is a
/// sentence or two (the demo study's longest opening question has 18).
const MOST_WORDS_ASKED: usize = 40;

/// Words a closing may run to.
const MOST_WORDS_SAID: usize = 50;

/// Words a question before the one asked may have and still be a reaction ("Really?", "Is
/// that so?").
const REACTION_WORDS: usize = 3;

/// Whether `text` says the same four words three times or more: a model caught in a loop
/// ("Your summary is: Your summary is: Your summary is: …", seen as a whole summary).
pub(super) fn over_and_over(text: &str) -> bool {
    let all = words(text);
    let mut seen: std::collections::HashMap<&[String], usize> = std::collections::HashMap::new();
    all.windows(4).any(|w| {
        let n = seen.entry(w).or_default();
        *n += 1;
        *n >= 3
    })
}

/// Words in `text`, a CJK character counting as half a word (a Chinese question of forty
/// characters says about what twenty English words do).
fn word_weight(text: &str) -> usize {
    let all = words(text);
    let cjk = all.iter().filter(|w| is_cjk_word(w)).count();
    all.len() - cjk + cjk.div_ceil(2)
}

/// What the model says must be its own and new. A message that repeats an interviewer message
/// word for word is refused (a summary presented again after an addition excepted):
/// SmolLM2-135M asked the same opening question four times in one interview (the participant
/// answered it each time and the interview ran to its budget), and closed two turns in a row
/// with "Your response is too long. Please limit your responses to 100 words or less." Any
/// message that sends the participant's words back as its own is refused: ten words in a row of
/// a longer answer (twenty CJK characters), or a short answer as the whole message (the same
/// model sent a participant's whole answer back as its question). Quoting a few of the
/// participant's words ("Which vegetables go off first?", "So vegetables go off?") stays
/// possible. A refusal costs
/// only the words when the guards take the decision (`reworded.rs`).
pub(super) fn said_before(p: &Proposal, events: &[SessionEvent]) -> Option<Refused> {
    let message = p.message.as_deref()?;
    let said = words(message);
    if said.is_empty() {
        return None;
    }
    // Asking to confirm the summary again after an addition may present it in the same words.
    let repeats_allowed = p.action == AgentAction::SummarizeAndConfirm;
    for e in events {
        match &e.body {
            EventBody::AgentMessageCompleted { content, .. }
                if !repeats_allowed && words(content) == said =>
            {
                return Some(Refused("a message already said".into()));
            }
            EventBody::ParticipantMessageCreated { content, .. } if echoes(&said, content) => {
                return Some(Refused("the participant's own words".into()));
            }
            _ => {}
        }
    }
    None
}

/// Whether `said` repeats the participant's `answer`: a run of [`QUOTED_WORDS`] of its words
/// (twenty when most of the answer is CJK characters), or a shorter answer of three words or
/// more as the whole message.
fn echoes(said: &[String], answer: &str) -> bool {
    let theirs = words(answer);
    let cjk = theirs.iter().filter(|w| is_cjk_word(w)).count();
    let run = if cjk * 2 > theirs.len() {
        QUOTED_WORDS * 2
    } else {
        QUOTED_WORDS
    };
    let contains = |run: usize| {
        theirs
            .windows(run)
            .any(|w| said.windows(run).any(|s| s == w))
    };
    if theirs.len() >= run {
        return contains(run);
    }
    // Mirroring a short answer with a word added ("So vegetables go off?", "Why every Sunday
    // evening?") is an interviewer's echo probe; the answer alone sent back is not.
    theirs.len() >= 3 && said == theirs.as_slice()
}

/// Words in a row of the participant's that a message may repeat (fewer than this).
const QUOTED_WORDS: usize = 10;

/// Whether `c` is written in a script without spaces between words (Chinese, Japanese, Korean),
/// where one character carries about a word.
pub(super) fn is_cjk(c: char) -> bool {
    matches!(c, '\u{3040}'..='\u{30ff}' | '\u{3400}'..='\u{9fff}' | '\u{ac00}'..='\u{d7af}')
}

fn is_cjk_word(w: &str) -> bool {
    w.chars().next().is_some_and(is_cjk)
}

/// A text's words, lower-cased, without punctuation; a CJK character counts as a word.
pub(super) fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if is_cjk(c) {
            out.extend((!word.is_empty()).then(|| std::mem::take(&mut word)));
            out.push(c.to_string());
        } else if c.is_alphanumeric() || c == '\'' {
            word.extend(c.to_lowercase());
        } else if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
    }
    out.extend((!word.is_empty()).then_some(word));
    out
}

#[cfg(test)]
mod tests {
    use super::super::step_text::tests::proposal;
    use super::*;
    use interview_session::decision::{ConcludeReason, ProbeTrigger};

    fn said(action: AgentAction, text: &str) -> Proposal {
        Proposal {
            action,
            message: Some(text.into()),
            interaction: None,
            ..proposal(serde_json::json!({"type": "yes_no", "prompt": "p", "research_intent": "r"}))
        }
    }

    fn probe() -> AgentAction {
        AgentAction::Probe {
            objective_id: "o".into(),
            based_on_turn_id: None,
            trigger: ProbeTrigger::Vague,
        }
    }

    #[test]
    fn an_interviewer_asks_one_short_question_at_a_time() {
        let close = || AgentAction::Conclude {
            reason: ConcludeReason::AllMustObjectivesCovered,
        };
        for (action, bad) in [
            (probe(), "What is the most frustrating part of planning your grocery shopping? The question you asked yourself last week about what to buy?"),
            (close(), "Thank you! Anything else?"),
            (AgentAction::RenderInteraction { objective_id: None }, "Which of these do you use? And how often do you use it?"),
            (probe(), "Could you tell me more about how you plan, what you buy, where you buy it, who comes with you, how long it takes, what it costs, what you forget, what you throw away, and what you would change about all of it if you could?"),
        ] {
            assert!(out_of_manner(&said(action, bad)).is_some(), "{bad}");
        }
        for (action, fine) in [
            (
                probe(),
                "That sounds like it matters a lot to you. What makes it feel that way?",
            ),
            (
                probe(),
                "你说周日晚上列清单，清单上一般会写些什么，又是怎么决定先买哪些菜的呢？",
            ),
            (
                close(),
                "Thank you so much for sharing your experience. That is the end of the interview.",
            ),
            (
                probe(),
                "Thanks for your response. What happened the last time?",
            ),
            (probe(), "Really? What happened then?"),
            (probe(), "是吗？后来呢？"),
            (close(), "Thank you, your responses will really help us."),
        ] {
            assert_eq!(out_of_manner(&said(action, fine)), None, "{fine}");
        }
        // A summary's message carries the summary: no length limit.
        let long = "You plan on Sundays. ".repeat(20);
        assert_eq!(
            out_of_manner(&said(AgentAction::SummarizeAndConfirm, &long)),
            None
        );
    }

    // Long by design: one small transcript built by hand, then the cases against it in turn: a
    // short answer sent back whole or quoted, Chinese answers of ten and twenty characters, a
    // widget's lead-in and the summary said again, then the questions refused and the ones allowed.
    #[test]
    fn a_message_said_before_or_in_the_participant_s_words_is_refused() {
        let event = |body: EventBody| SessionEvent {
            body,
            at: chrono::Utc::now(),
            salt: None,
            prev_hash: String::new(),
            hash: String::new(),
        };
        let question = "What is the most frustrating part of planning your groceries?";
        let answer = "Well, to be honest the most frustrating part is that vegetables go off before we get to them.";
        let events = [
            event(EventBody::AgentMessageCompleted {
                message_id: uuid::Uuid::nil(),
                content: question.into(),
            }),
            event(EventBody::ParticipantMessageCreated {
                turn_id: uuid::Uuid::nil(),
                client_message_id: None,
                content: answer.into(),
            }),
        ];
        let ask = |text: &str| said(probe(), text);
        let short = [event(EventBody::ParticipantMessageCreated {
            turn_id: uuid::Uuid::nil(),
            client_message_id: None,
            content: "Vegetables go off.".into(),
        })];
        let short_zh = [event(EventBody::ParticipantMessageCreated {
            turn_id: uuid::Uuid::nil(),
            client_message_id: None,
            content: "我一般周日晚上列清单，然后周一去超市买一周的菜。".into(),
        })];
        // A short answer sent back whole is refused; quoting it in a question is not.
        assert!(said_before(&ask("Vegetables go off?"), &short).is_some());
        assert_eq!(said_before(&ask("So vegetables go off?"), &short), None);
        assert_eq!(
            said_before(&ask("Which vegetables go off first?"), &short),
            None
        );
        // Ten Chinese characters are a few words, not a copied answer; twenty are.
        assert_eq!(
            said_before(&ask("你说周日晚上列清单，清单上一般有什么？"), &short_zh),
            None
        );
        assert!(said_before(
            &ask("我一般周日晚上列清单，然后周一去超市买一周的菜吗？"),
            &short_zh
        )
        .is_some());
        // A widget's lead-in said again is refused; the summary presented again is not.
        let lead_in = Proposal {
            message: Some(question.into()),
            ..proposal(serde_json::json!({"type": "yes_no", "prompt": "p", "research_intent": "r"}))
        };
        assert!(said_before(&lead_in, &events).is_some());
        let summary = said(AgentAction::SummarizeAndConfirm, question);
        assert_eq!(said_before(&summary, &events), None);
        for bad in [
            question,
            "what is the most frustrating part of planning your groceries",
            "Well, to be honest the most frustrating part is that vegetables go off?",
        ] {
            assert!(said_before(&ask(bad), &events).is_some(), "{bad}");
        }
        for fine in [
            "What else frustrates you about planning your groceries?",
            "You said vegetables go off before you get to them: which ones?",
        ] {
            assert_eq!(said_before(&ask(fine), &events), None, "{fine}");
        }
    }
}
