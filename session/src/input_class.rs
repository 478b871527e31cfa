//! What a participant's message is, before it can become research data (issue 29): an answer,
//! or one of the replies that are not — a question back, a non-answer ("nothing more",
//! "不知道"), a refusal, an end wish. Deterministic rules in the two languages the product
//! speaks; only an answer feeds a field.

use crate::text::{is_cjk, normalize};

/// The kind of a participant's message. Recorded on the decision that follows it (`snake_case`):
/// the rules below judge it, or in `llm` mode the model (`participant_input`), which may also
/// tell a partial answer and an off-topic remark apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(test, derive(strum::EnumIter))]
#[serde(rename_all = "snake_case")]
#[derive(strum::AsRefStr)]
#[strum(serialize_all = "snake_case")]
pub enum InputClass {
    /// Says something about the question: may feed a field.
    Answer,
    /// Answers part of the question (the model's judgement only): may feed a field.
    PartialAnswer,
    /// Talks about something else (the model's judgement only): feeds no field.
    OffTopic,
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
        matches!(self, InputClass::Answer | InputClass::PartialAnswer)
    }
}

/// Whole messages (compared after `text::normalize`, so apostrophes and case do not matter)
/// that add nothing. Not a bare "no", "none" or "没有": to a closed question those are answers.
const NON_ANSWERS: &[&str] = &[
    "nothing more",
    "nothing else",
    "no more",
    "nothing to add",
    "i have nothing to add",
    "nothing more to add",
    "that's it",
    "that's all",
    "that is all",
    "that's all i have",
    "i don't know",
    "don't know",
    "dunno",
    "idk",
    "no idea",
    "i have no idea",
    "not sure",
    "i'm not sure",
    "n/a",
    "same as before",
    "no clue",
    "not a clue",
    "don't remember",
    "can't remember",
    "i can't say",
    "hard to say",
    "no opinion",
    "没有了",
    "没了",
    "没什么",
    "没什么了",
    "不知道",
    "不清楚",
    "不太清楚",
    "不确定",
    "说不上来",
    "说不清楚",
    "不记得",
    "不记得了",
    "忘了",
    "没想过",
    "就这些",
    "就这些了",
    "就这样",
    "没有补充",
    "同上",
];

/// Clauses that carry nothing on their own: a message of non-answers and these is a non-answer
/// ("No idea, really.", "嗯，不知道").
const FILLERS: &[&str] = &[
    "really",
    "honestly",
    "sorry",
    "um",
    "uh",
    "hmm",
    "well",
    "so",
    "ok",
    "okay",
    "to be honest",
    "i think",
    "i guess",
    "at all",
    "嗯",
    "啊",
    "呃",
    "哈",
    "其实",
    "说实话",
    "抱歉",
];

/// Whole messages that decline to answer (compared without pronouns and intensifiers, see
/// [`core`]: "I'd rather not talk about that" is "rather not talk").
const REFUSALS: &[&str] = &[
    "rather not talk",
    "rather not go into",
    "prefer not to talk",
    "don't want to talk",
    "don't want to say",
    "not comfortable answering",
    "not comfortable saying",
    "none of your business",
    "no comment",
    "不想谈",
    "不想聊这个",
    "不想说了",
    "i'd rather not say",
    "i would rather not say",
    "i'd rather not",
    "prefer not to say",
    "i prefer not to say",
    "i'd prefer not to say",
    "i don't want to answer",
    "i'd rather not answer",
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

/// Phrases that ask for the end of the interview — counted only at the end of a clause, with
/// nothing after them but [`END_FILLERS`] ("can we wrap up now?", "我不想继续了"), so that "I wrap
/// up leftovers in foil", "I don't want to continue dieting" or "我不想继续点外卖了" stay answers.
const END_WISHES: &[&str] = &[
    "wrap up",
    "wrap this up",
    "wrap it up",
    "rather not continue",
    "don't want to continue",
    "do not want to continue",
    "can we stop",
    "could we stop",
    "let's stop",
    "stop the interview",
    "end the interview",
    "end this interview",
    "finish the interview",
    "can we finish",
    "不想继续",
    "不想再聊",
    "可以结束了吗",
    "结束访谈",
    "结束吧",
    "到此为止",
    "不聊了",
];

/// What makes "wrap up" a request.
const REQUEST_FRAMES: &[&str] = &[
    "can we",
    "could we",
    "shall we",
    "lets",
    "let us",
    "please",
    "we should",
    "want to",
    "like to",
    "id like to",
    "i want to",
];

/// What may follow an end wish in its clause.
const END_FILLERS: &[&str] = &[
    "now",
    "here",
    "please",
    "today",
    "for today",
    "the interview",
    "this interview",
    "this",
    "thanks",
    "thank you",
    "soon",
    "了",
    "吧",
    "吗",
    "啊",
    "呢",
    "好吗",
    "可以吗",
];

/// Parts of a short question that ask what the question means.
const QUESTIONS_BACK: &[&str] = &[
    "what do you mean",
    "what does that mean",
    "could you explain",
    "can you explain",
    "could you rephrase",
    "can you rephrase",
    "i don't understand the question",
    "i don't understand",
    "what do you mean exactly",
    "啥意思",
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

/// Words that carry no meaning of their own in a short reply: pronouns, intensifiers, politeness
/// ("I really don't know" is "don't know"; "我也说不清楚" is "说不清楚").
const LIGHT_WORDS: &[&str] = &[
    "i", "id", "im", "ive", "really", "honestly", "actually", "just", "sorry", "um", "uh", "well",
    "so", "that", "this", "about", "it", "quite", "very", "me", "to", "be", "honest", "anymore",
    "at", "all", "though", "then",
];
const LIGHT_CJK: &[&str] = &[
    "我也", "我", "真的", "其实", "这个", "那个", "啊", "吧", "呢", "哦", "嗯", "也",
];

/// A phrase list as [`classify`] compares with it: each phrase normalized, and its core. The
/// lists are constants, so this is worked out once, not on every message (a step classifies
/// each of a session's answers several times).
struct Prepared(Vec<(String, String)>);

impl Prepared {
    fn of(list: &[&str]) -> Self {
        Self(list.iter().map(|p| (normalize(p), core(p))).collect())
    }

    /// `said` is one of the phrases, or has the same core as one.
    fn holds(&self, said: &Said) -> bool {
        self.0.iter().any(|(p, core_p)| {
            *p == said.normalized || (!said.core.is_empty() && *core_p == said.core)
        })
    }

    fn normalized(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(p, _)| p.as_str())
    }
}

/// The lists above, prepared.
struct Lists {
    non_answers: Prepared,
    fillers: Prepared,
    refusals: Prepared,
    end_wishes: Prepared,
    end_fillers: Prepared,
    questions_back: Prepared,
}

static LISTS: std::sync::LazyLock<Lists> = std::sync::LazyLock::new(|| Lists {
    non_answers: Prepared::of(NON_ANSWERS),
    fillers: Prepared::of(FILLERS),
    refusals: Prepared::of(REFUSALS),
    end_wishes: Prepared::of(END_WISHES),
    end_fillers: Prepared::of(END_FILLERS),
    questions_back: Prepared::of(QUESTIONS_BACK),
});

/// A message (or one of its clauses) as the lists are compared with it: normalized, and its core
/// — worked out once per message, not once per list.
struct Said {
    normalized: String,
    core: String,
}

impl Said {
    fn of(text: &str) -> Self {
        let normalized = normalize(text);
        Self {
            core: core(&normalized),
            normalized,
        }
    }
}

/// A reply without its light words, for comparing short replies with the lists above.
fn core(text: &str) -> String {
    let n = normalize(text);
    let mut words: Vec<String> = n
        .split(' ')
        .filter(|w| !w.is_empty() && !LIGHT_WORDS.contains(w))
        .map(String::from)
        .collect();
    for w in words.iter_mut().filter(|w| w.chars().any(is_cjk)) {
        for light in LIGHT_CJK {
            if w.len() > light.len() {
                *w = w.replace(light, "");
            }
        }
    }
    words.retain(|w| !w.is_empty());
    words.join(" ")
}

/// A short message: at most 12 words, or 24 CJK characters.
fn is_short(normalized: &str) -> bool {
    let cjk = normalized.chars().filter(|c| is_cjk(*c)).count();
    let words = normalized
        .split_whitespace()
        .filter(|w| !w.chars().any(is_cjk))
        .count();
    words + cjk / 2 <= 12
}

/// Whether a clause (normalized) ends with one of `wishes`, followed only by fillers.
fn ends_with_wish(clause: &str) -> bool {
    LISTS.end_wishes.normalized().any(|wish| {
        let Some(at) = clause.rfind(wish) else {
            return false;
        };
        // Latin phrases start at a word.
        if wish.is_ascii() && at > 0 && !clause[..at].ends_with(' ') {
            return false;
        }
        // "wrap it up" is something people do to leftovers: it asks for the end only as a
        // request ("can we wrap up", "let's wrap this up") or on its own ("Wrap it up now").
        if wish.starts_with("wrap") {
            let head = &clause[..at];
            let framed = REQUEST_FRAMES
                .iter()
                .any(|f| format!(" {head}").contains(&format!(" {f} ")));
            if !framed && head.split_whitespace().count() > 1 {
                return false;
            }
        }
        let mut rest = clause[at + wish.len()..].trim().to_string();
        // Strip trailing fillers, longest first, until nothing or something else is left.
        loop {
            let before = rest.clone();
            for filler in LISTS.end_fillers.normalized() {
                if let Some(r) = rest.strip_prefix(filler) {
                    if filler.is_ascii() && !(r.is_empty() || r.starts_with(' ')) {
                        continue;
                    }
                    rest = r.trim().to_string();
                }
            }
            if rest.is_empty() {
                return true;
            }
            if rest == before {
                return false;
            }
        }
    })
}

/// What `text` is, given the study's end phrases.
pub fn classify(text: &str, end_phrases: &[String]) -> InputClass {
    let message = Said::of(text);
    let n = &message.normalized;
    let padded = format!(" {n} ");
    let has = |parts: &Prepared| {
        parts.normalized().any(|p| {
            // Latin phrases match whole words; CJK ones anywhere.
            if p.is_ascii() {
                padded.contains(&format!(" {p} "))
            } else {
                n.contains(p)
            }
        })
    };
    // The whole message is one of `list`, or each of its clauses is one of `list` or a filler,
    // one at least from `list`.
    let clauses: Vec<Said> = crate::text::clauses(text)
        .map(Said::of)
        .filter(|c| !c.normalized.is_empty())
        .collect();
    let whole = |list: &Prepared| {
        list.holds(&message)
            || (clauses
                .iter()
                .all(|c| list.holds(c) || LISTS.fillers.holds(c))
                && clauses.iter().any(|c| list.holds(c)))
    };
    let wish = clauses.iter().any(|c| ends_with_wish(&c.normalized));
    if crate::text::matches_phrase(text, end_phrases) || wish {
        return InputClass::EndIntent;
    }
    if whole(&LISTS.refusals) {
        return InputClass::Refusal;
    }
    if n.is_empty() || whole(&LISTS.non_answers) {
        return InputClass::NonAnswer;
    }
    let asks = text.trim_end().ends_with(['?', '？']);
    if has(&LISTS.questions_back) && is_short(n) && (asks || n.chars().count() <= 40) {
        return InputClass::QuestionBack;
    }
    InputClass::Answer
}

#[cfg(test)]
mod tests {
    use super::*;

    // Long by design: a table of replies, one row each with the class it gets: answers, questions
    // back, non-answers, refusals and wishes to end, in English and Chinese, with answers that only
    // look like the others beside them.
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
            ("Not sure", InputClass::NonAnswer),
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
            ("I wrap up leftovers in foil", InputClass::Answer),
            ("I don't want to continue dieting", InputClass::Answer),
            (
                "Can we finish the leftovers? We usually do",
                InputClass::Answer,
            ),
            ("我不想继续点外卖了", InputClass::Answer),
            ("Can we wrap up now?", InputClass::EndIntent),
            ("Let's stop here, thanks", InputClass::EndIntent),
            ("No", InputClass::Answer),
            ("None", InputClass::Answer),
            ("没有", InputClass::Answer),
            ("That's all I have", InputClass::NonAnswer),
            ("就这些了", InputClass::NonAnswer),
            ("dunno", InputClass::NonAnswer),
            ("I really don't know.", InputClass::NonAnswer),
            ("Honestly I have no idea", InputClass::NonAnswer),
            ("No clue.", InputClass::NonAnswer),
            ("我不知道。", InputClass::NonAnswer),
            ("我也说不清楚", InputClass::NonAnswer),
            ("I'd rather not talk about that.", InputClass::Refusal),
            ("我不想回答这个。", InputClass::Refusal),
            ("不想说了", InputClass::Refusal),
            ("No comment.", InputClass::Refusal),
            ("啥意思？", InputClass::QuestionBack),
            (
                "On Sunday I cook a big batch, portion it and wrap it up.",
                InputClass::Answer,
            ),
            ("Let's wrap this up.", InputClass::EndIntent),
            ("Wrap it up now", InputClass::EndIntent),
            ("I don't know, maybe twice a week", InputClass::Answer),
            (
                "Pass the salt is what I say most at dinner",
                InputClass::Answer,
            ),
            ("No idea, really.", InputClass::NonAnswer),
            ("That's all, nothing more to add.", InputClass::NonAnswer),
            ("嗯，不知道。", InputClass::NonAnswer),
            ("No idea, but we often buy too much", InputClass::Answer),
            ("Sorry, I'd rather not say.", InputClass::Refusal),
            ("I'd rather not", InputClass::Refusal),
            (
                "我不太明白为什么我每周都要花那么多时间去超市买菜然后回家再慢慢整理冰箱里的东西",
                InputClass::Answer,
            ),
        ];
        for (text, class) in table {
            assert_eq!(classify(text, &ends), class, "{text:?}");
        }
    }
}
