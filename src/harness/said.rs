//! How an interviewer speaks, checked on the model's whole message before a participant reads
//! it: one question at a time, briefly, in its own role, in words not said before — neither its
//! own earlier messages again nor the participant's answer sent back. Each rule answers what
//! SmolLM2-135M did on a real server (`docs/llm-contract.md`, "What the participant reads");
//! what a refusal costs is the model's words, not its decision, when the guards take the
//! decision as proposed (`reworded.rs`).

use interview_session::decision::{AgentAction, Proposal};
use interview_session::events::{EventBody, SessionEvent};

use crate::llm::visible::Refused;

/// A message out of an interviewer's manner: more than one question at a time, a question in a
/// closing, longer than a participant reads at once, or words that speak from the wrong side
/// of the interview.
pub(super) fn out_of_manner(p: &Proposal) -> Option<Refused> {
    let text = p.message.as_deref()?;
    let questions = text.matches(['?', '？']).count();
    let limit = match p.action {
        // One question at a time, as interview guides teach: "What did you plan? The question
        // you asked yourself last week…?" (seen) is two, and a run-on.
        AgentAction::AskQuestion { .. } | AgentAction::Probe { .. } => {
            if questions > 1 {
                return Some(Refused("more than one question at a time".into()));
            }
            MOST_WORDS_ASKED
        }
        AgentAction::Conclude { .. } => {
            if questions > 0 {
                return Some(Refused("a question in a closing".into()));
            }
            MOST_WORDS_SAID
        }
        AgentAction::RenderInteraction { .. } => MOST_WORDS_ASKED,
        // The summary's message carries the summary itself; its length is the summary's.
        AgentAction::SummarizeAndConfirm | AgentAction::ExtractFields => usize::MAX,
    };
    if word_weight(text) > limit {
        return Some(Refused("a message longer than one reads at once".into()));
    }
    let lower = text.to_lowercase();
    WRONG_SIDE
        .iter()
        .find(|phrase| lower.contains(*phrase))
        .map(|phrase| {
            Refused(format!(
                "words from the wrong side of the interview ({phrase:?})"
            ))
        })
}

/// Words a question, a probe or a widget's lead-in may run to: an interviewer's question is a
/// sentence or two (the demo study's longest opening question has 18).
const MOST_WORDS_ASKED: usize = 40;

/// Words a closing may run to.
const MOST_WORDS_SAID: usize = 50;

/// The interviewer talking as if it were the one interviewed, or grading the participant — all
/// seen from SmolLM2-135M as whole messages: "You asked me to walk you through how I usually
/// decide…", "Your last question was about planning…", "Your response is too long. Please
/// limit your responses to 100 words or less."
const WRONG_SIDE: &[&str] = &[
    "you asked me",
    "the question you asked",
    "your last question",
    "you were asked",
    "your response is",
    "your response was",
    "your responses",
    "limit your",
];

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
/// a longer answer (twenty CJK characters), or a short answer whole with at most one word added
/// (the same model sent a participant's whole answer back as its question). Quoting a few of
/// the participant's words ("Which vegetables go off first?") stays possible. A refusal costs
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
/// (a CJK character counting as a third of a word), or all of a shorter answer of three words
/// or more with at most one word added.
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
    theirs.len() >= 3 && said.len() <= theirs.len() + 1 && contains(theirs.len())
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
fn words(text: &str) -> Vec<String> {
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
    fn an_interviewer_asks_one_short_question_from_its_own_side() {
        let close = || AgentAction::Conclude {
            reason: ConcludeReason::AllMustObjectivesCovered,
        };
        for (action, bad) in [
            (probe(), "What is the most frustrating part of planning your grocery shopping? The question you asked yourself last week about what to buy?"),
            (probe(), "You asked me to walk you through how I usually decide what groceries to buy for the week?"),
            (close(), "Your response is too long. Please limit your responses to 100 words or less."),
            (close(), "Thank you! Anything else?"),
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
        assert!(said_before(&ask("So vegetables go off?"), &short).is_some());
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
