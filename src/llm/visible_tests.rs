//! Tests of `visible.rs`: the fixed terms, their hold-back while a text streams, disguises.

use super::*;

fn demo() -> PinnedStudy {
    crate::demo::definition()
        .versioned_documents()
        .pin("s", "demo")
}

/// The demo study without internal notes: these tests are about terms (the notes are
/// `super::super::leaks`'s).
fn visible() -> Visible {
    let mut study = demo();
    study.study_config.objectives[0].id = "planning_habits".into();
    study.agent_config.instructions.clear();
    study
        .study_config
        .objectives
        .iter_mut()
        .for_each(|o| o.description.clear());
    study
        .output_schema
        .fields
        .iter_mut()
        .for_each(|f| f.description.clear());
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
        // The phrases the prompt talks in, said as an interviewer would (issue 32's review).
        "What is your objective when you shop for the week?",
        "How could the user interface of the app be clearer?",
        "What in your week calls for it?",
        "How long was the last step of your trip?",
        "How do you limit your food waste during the week?",
        "Thank you, your responses will really help us.",
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
        ("Use addToCart() for it?", "()"),
        (
            "The user asked you to answer a question about food.",
            "the user asked",
        ),
        (
            "Your objective is to plan your weekly shopping.",
            "your objective is",
        ),
        (
            "You asked me to walk you through how I usually decide what to buy?",
            "you asked me to",
        ),
        (
            "Your response is too long. Please limit your responses to 100 words or less.",
            "your response is too",
        ),
        ("你的回答太长了，请限制在100字以内。", "你的回答太"),
        ("参与者说他每周买一次菜。", "参与者"),
    ] {
        let (shown, refused) = stream(&v, text);
        let expected = if term.contains('_') {
            "an identifier"
        } else if term.starts_with('<') {
            "markup" // refused from its first letter (`super::super::leaks`)
        } else {
            term
        };
        assert_eq!(refused, Some(Refused(expected.into())), "{text}");
        // The term never showed (what did show is replaced with the utterance).
        assert!(
            !shown.to_ascii_lowercase().contains(term),
            "{text}: {shown}"
        );
        assert!(text.starts_with(&shown));
    }
}

#[test]
fn the_hold_back_is_only_what_a_term_could_start() {
    let v = visible();
    assert_eq!(
        v.check("Tell me more. Which harn", false),
        Ok("Tell me more. Which ".len())
    );
    // The last word is held while it could begin the runtime's own instructions ("me" →
    // "mentioning tools, agents…", "message is what the participant reads"); the complete text
    // is shown whole.
    assert_eq!(
        v.check("Thanks! Could you tell me", false),
        Ok("Thanks! Could you tell ".len())
    );
    assert_eq!(
        v.check("Thanks! Could you tell me", true),
        Ok("Thanks! Could you tell me".len())
    );
    assert_eq!(
        v.check("Which toolbox", false),
        Ok("Which toolbox".len()),
        "another word"
    );
    // An identifier is held from its `_` on; a phrase from its last word.
    assert_eq!(v.check("About planning", false), Ok("About planning".len()));
    assert_eq!(
        v.check("About planning_", false),
        Ok("About planning".len())
    );
    // "as an AI" is a term, and "as an" also begins the runtime's instructions ("yourself as
    // an AI…"): held from "as" either way, until the words say otherwise.
    assert_eq!(v.check("Well, as an", false), Ok("Well, ".len()));
    assert_eq!(v.check("Well, as an a", false), Ok("Well, ".len()));
    assert_eq!(
        v.check("Well, as an aside", true),
        Ok("Well, as an aside".len())
    );
}

/// What an attacker's review found: hidden characters, spacing, plurals, identifiers, and
/// a term starting with a multi-byte character (which once panicked the check).
#[test]
fn disguised_terms_are_refused_and_nothing_panics() {
    let v = visible();
    for text in [
        "我作为AIGC从业者想问你",
        "那么我是AIa",
        "我是 AI，想问你",
        "Which ｔｏｏｌ do you use?",
        "Which ag\u{200B}ent helped?",
        "As an  AI, I wonder",
        "As an\u{00A0}AI, I wonder",
        "Which agents helped?",
        "Next: conclude(reason=all_must_objectives_covered)",
        "A <tool_call> follows",
    ] {
        let (_, refused) = stream(&v, text);
        // 作为AIGC is a word of its own: fine. The rest are refused.
        if text.starts_with("我作为AIGC") || text == "那么我是AIa" {
            assert_eq!(refused, None, "{text}");
        } else {
            assert!(refused.is_some(), "{text}");
        }
    }
    // Chinese fullwidth punctuation is normal text.
    assert_eq!(v.refuses("你平时怎么计划？有什么工具吗！"), None);
    // A study text with such a term does not panic either.
    let mut study = demo();
    study.study_config.description = "作为AIGC从业者的访谈".into();
    let _ = Visible::for_study(&study);
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
