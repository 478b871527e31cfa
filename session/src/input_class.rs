//! What a participant's message is, before it can become research data (issue 29): an answer,
//! or one of the replies that are not — a question back, a non-answer ("nothing more",
//! "不知道"), a refusal, an end wish. Deterministic rules in the two languages the product
//! speaks; only an answer feeds a field.

use crate::text::normalize;

/// The kind of a participant's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputClass {
    /// Says something about the question: may feed a field.
    Answer,
    /// Asks what the question means ("What do you mean by that?").
    QuestionBack,
    /// Has nothing to add ("Nothing more.", "No idea", "没有了").
    NonAnswer,
    /// Declines to answer ("I'd rather not say", "不想回答").
    Refusal,
    /// Wants the interview to end: one of the study's end phrases, or a sentence that says so.
    EndIntent,
}

impl InputClass {
    /// Whether the message may feed a field.
    pub fn is_answer(self) -> bool {
        matches!(self, InputClass::Answer)
    }
}

/// Whole messages (normalized: `text::normalize`) that add nothing.
const NON_ANSWERS: &[&str] = &[
    "no",
    "nope",
    "nah",
    "none",
    "nothing",
    "nothing more",
    "nothing else",
    "not really",
    "no more",
    "nothing to add",
    "i have nothing to add",
    "nothing more to add",
    "that s it",
    "thats it",
    "that s all",
    "i don t know",
    "i dont know",
    "dont know",
    "don t know",
    "idk",
    "no idea",
    "not sure",
    "i m not sure",
    "im not sure",
    "n a",
    "na",
    "no comment",
    "same",
    "same as before",
    "as i said",
    "没有",
    "没有了",
    "没了",
    "没什么",
    "没什么了",
    "不知道",
    "不清楚",
    "不确定",
    "说不上来",
    "就这些",
    "就这样",
    "没有补充",
    "无",
    "同上",
];

/// Whole messages that decline to answer.
const REFUSALS: &[&str] = &[
    "i d rather not say",
    "id rather not say",
    "i would rather not say",
    "prefer not to say",
    "i prefer not to say",
    "i d prefer not to say",
    "i don t want to answer",
    "i dont want to answer",
    "i d rather not answer",
    "i would rather not answer",
    "rather not say",
    "pass",
    "skip",
    "next question",
    "不想回答",
    "不方便说",
    "不想说",
    "跳过",
    "下一个问题",
    "保密",
];

/// Parts of a sentence that ask for the end, in a message of any length. Specific to the
/// interview itself: "I want to stop buying snacks" is an answer, not an end wish.
const END_WISHES: &[&str] = &[
    "wrap up",
    "wrap this up",
    "wrap it up",
    "rather not continue",
    "don t want to continue",
    "dont want to continue",
    "do not want to continue",
    "can we stop",
    "could we stop",
    "let s stop here",
    "lets stop here",
    "stop the interview",
    "end the interview",
    "end this interview",
    "finish the interview",
    "can we finish",
    "stop here please",
    "不想继续",
    "不想再聊",
    "可以结束了吗",
    "结束访谈",
    "结束吧",
    "到此为止",
    "不聊了",
];

/// Parts of a question that ask what the question means.
const QUESTIONS_BACK: &[&str] = &[
    "what do you mean",
    "what does that mean",
    "what do you mean by",
    "could you explain",
    "can you explain",
    "could you rephrase",
    "can you rephrase",
    "i don t understand the question",
    "i dont understand the question",
    "what is meant",
    "do you mean",
    "什么意思",
    "你是指",
    "你是说",
    "没听懂",
    "不太明白",
    "不明白你的意思",
    "能解释",
];

/// What `text` is, given the study's end phrases.
pub fn classify(text: &str, end_phrases: &[String]) -> InputClass {
    let n = normalize(text);
    let padded = format!(" {n} ");
    let has = |parts: &[&str]| {
        parts.iter().any(|p| {
            let p = normalize(p);
            // Latin phrases match whole words; CJK ones anywhere.
            if p.is_ascii() {
                padded.contains(&format!(" {p} "))
            } else {
                n.contains(&p)
            }
        })
    };
    let whole = |list: &[&str]| list.iter().any(|p| normalize(p) == n);
    if crate::text::matches_phrase(text, end_phrases) || has(END_WISHES) {
        return InputClass::EndIntent;
    }
    if whole(REFUSALS) {
        return InputClass::Refusal;
    }
    if n.is_empty() || whole(NON_ANSWERS) {
        return InputClass::NonAnswer;
    }
    let asks = text.trim_end().ends_with(['?', '？']);
    let words = n.split_whitespace().count();
    if has(QUESTIONS_BACK) && (asks || words <= 8) {
        return InputClass::QuestionBack;
    }
    InputClass::Answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_that_are_not_answers_are_told_apart_in_both_languages() {
        let ends = ["i'm done".to_string(), "我说完了".to_string()];
        let table = [
            ("I plan meals every Sunday with a list.", InputClass::Answer),
            (
                "No, I never plan; I buy on the way home.",
                InputClass::Answer,
            ),
            (
                "Not sure I'd call it a plan, but I keep a list",
                InputClass::Answer,
            ),
            ("What do you mean by that?", InputClass::QuestionBack),
            ("你是指什么？", InputClass::QuestionBack),
            ("Nothing more.", InputClass::NonAnswer),
            ("nothing more", InputClass::NonAnswer),
            ("I don't know", InputClass::NonAnswer),
            ("没有了。", InputClass::NonAnswer),
            ("不知道", InputClass::NonAnswer),
            ("", InputClass::NonAnswer),
            ("I'd rather not say.", InputClass::Refusal),
            ("不想回答", InputClass::Refusal),
            ("I'm done", InputClass::EndIntent),
            ("我说完了", InputClass::EndIntent),
            (
                "Sorry, I'd rather not continue, can we wrap up now please?",
                InputClass::EndIntent,
            ),
            ("我不想继续了", InputClass::EndIntent),
            ("I want to stop buying snacks at night", InputClass::Answer),
            ("We end this week with leftovers", InputClass::Answer),
        ];
        for (text, class) in table {
            assert_eq!(classify(text, &ends), class, "{text:?}");
        }
    }
}
