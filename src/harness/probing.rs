//! When the offline interviewer probes, why, and with what words (FR-04-14). Deterministic
//! heuristics, English and Chinese, checked in this order on the participant's latest answer to
//! the objective in progress:
//!
//! 1. **strong emotion** — a word of a small emotion lexicon ("hate", "furious", "love", "气死",
//!    "受不了", …), or `!!`;
//! 2. **contradiction** — a negation ("never", "don't", "不", "没", …) of something the
//!    participant said earlier on the same objective: a content word of an earlier answer right
//!    after a negation in this one;
//! 3. **vague** — no concrete detail: no number, time (a weekday, "morning", "周末", "晚上", …),
//!    place or named thing (a capitalised word inside an English sentence; "超市", "手机", … in
//!    Chinese), and short (under 8 words; under 15 characters of CJK text), or hedged ("maybe",
//!    "看情况", …);
//! 4. **missing field** — a required text field of the objective the answers so far would not
//!    bring to the study's confidence threshold.
//!
//! The words: the study's `probe_hints` first, turned into a question ("ask for the last
//! concrete example" → "Could you tell me more about the last concrete example?"), then generic
//! probes for the trigger; never the same question twice on an objective.

use interview_session::decision::ProbeTrigger;
use interview_session::text;

/// A probe to ask: its trigger, what in the answer caused it, and the question.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub trigger: ProbeTrigger,
    pub because: String,
    pub question: String,
}

const EMOTION_EN: &[&str] = &[
    "hate",
    "furious",
    "angry",
    "annoying",
    "annoyed",
    "frustrating",
    "frustrated",
    "awful",
    "terrible",
    "horrible",
    "disgusting",
    "stressful",
    "stressed",
    "exhausting",
    "love",
    "adore",
    "drives me crazy",
    "fed up",
    "sick of",
    "worst",
    "nightmare",
];
const EMOTION_ZH: &[&str] = &[
    "讨厌",
    "气死",
    "生气",
    "受不了",
    "崩溃",
    "烦死",
    "太烦",
    "郁闷",
    "焦虑",
    "恶心",
    "最喜欢",
    "特别喜欢",
    "爱死",
    "糟糕",
    "头疼",
];
const NEGATIONS_EN: &[&str] = &[
    "not", "never", "don't", "dont", "doesn't", "didn't", "no", "isn't", "aren't", "won't",
    "hardly",
];
const NEGATIONS_ZH: &[&str] = &["从不", "从来不", "没有", "不", "没"];
const HEDGES: &[&str] = &[
    "maybe",
    "not sure",
    "it depends",
    "depends",
    "i don't know",
    "dont know",
    "sometimes",
    "kind of",
    "sort of",
    "不知道",
    "还行",
    "一般",
    "看情况",
    "可能",
    "说不清",
];
const TIMES_EN: &[&str] = &[
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "weekend",
    "morning",
    "evening",
    "night",
    "afternoon",
    "yesterday",
    "today",
    "week",
    "month",
    "daily",
    "weekly",
    "minutes",
    "hours",
];
const CONCRETE_ZH: &[&str] = &[
    "周", "星期", "早上", "晚上", "中午", "下午", "昨天", "今天", "每天", "周末", "月", "分钟",
    "小时", "超市", "市场", "手机", "家里", "冰箱", "清单", "网上", "外卖", "店", "孩子", "老公",
    "老婆", "妈妈",
];

fn cjk_chars(t: &str) -> usize {
    t.chars().filter(|c| (*c as u32) >= 0x3040).count()
}

/// Words, counting CJK text by characters (two characters for a word).
pub fn word_count(t: &str) -> usize {
    let cjk = cjk_chars(t);
    let latin = text::normalize(t)
        .split(' ')
        .filter(|w| !w.is_empty() && w.chars().all(|c| (c as u32) < 0x3040))
        .count();
    latin + cjk.div_ceil(2)
}

fn normalized_words(t: &str) -> Vec<String> {
    text::normalize(t)
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(String::from)
        .collect()
}

fn strong_emotion(answer: &str) -> Option<String> {
    let n = text::normalize(answer);
    let padded = format!(" {n} ");
    EMOTION_EN
        .iter()
        .find(|w| padded.contains(&format!(" {w} ")) || (w.len() > 5 && n.contains(*w)))
        .map(|w| w.to_string())
        .or_else(|| {
            EMOTION_ZH
                .iter()
                .find(|w| answer.contains(*w))
                .map(|w| w.to_string())
        })
        .or_else(|| answer.contains("!!").then(|| "!!".into()))
}

/// A content word of an earlier answer negated in `answer`.
fn contradiction(answer: &str, earlier: &[&str]) -> Option<String> {
    let words = normalized_words(answer);
    for (i, w) in words.iter().enumerate() {
        if !NEGATIONS_EN.contains(&w.as_str()) {
            continue;
        }
        for next in words.iter().skip(i + 1).take(3) {
            if next.chars().count() > 3
                && earlier
                    .iter()
                    .any(|e| normalized_words(e).iter().any(|x| x == next))
            {
                return Some(format!("\"{w} … {next}\""));
            }
        }
    }
    // Chinese: a negation directly before a phrase said earlier (two characters at least).
    for neg in NEGATIONS_ZH {
        for (at, _) in answer.match_indices(neg) {
            let after: String = answer[at + neg.len()..].chars().take(4).collect();
            for len in (2..=after.chars().count()).rev() {
                let phrase: String = after.chars().take(len).collect();
                if cjk_chars(&phrase) == len && earlier.iter().any(|e| e.contains(&phrase)) {
                    return Some(format!("「{neg}{phrase}」"));
                }
            }
        }
    }
    None
}

fn concrete_detail(answer: &str) -> Option<String> {
    if let Some(d) = answer.chars().find(|c| c.is_ascii_digit()) {
        return Some(format!("the number {d}…"));
    }
    let words = normalized_words(answer);
    if let Some(t) = words.iter().find(|w| TIMES_EN.contains(&w.as_str())) {
        return Some(format!("\"{t}\""));
    }
    if let Some(z) = CONCRETE_ZH.iter().find(|z| answer.contains(*z)) {
        return Some(format!("「{z}」"));
    }
    // A capitalised word inside a sentence names something (a shop, an app, a person).
    answer
        .split_whitespace()
        .skip(1)
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .find(|w| w.len() > 1 && w.chars().next().is_some_and(char::is_uppercase) && *w != "I")
        .map(|w| format!("\"{w}\""))
}

/// Why `answer` is vague, if it is.
fn vague(answer: &str) -> Option<String> {
    let n = text::normalize(answer);
    let hedge = HEDGES.iter().find(|h| n.contains(&text::normalize(h)));
    let concrete = concrete_detail(answer);
    let cjk = cjk_chars(answer);
    let short = if cjk > 0 {
        cjk < 15 && word_count(answer) < 8
    } else {
        word_count(answer) < 8
    };
    match (concrete, hedge) {
        (None, Some(h)) => Some(format!("it hedges (\"{h}\") and gives no concrete detail")),
        (None, None) if short => Some(format!(
            "it is short ({} words) and gives no concrete detail",
            word_count(answer)
        )),
        _ => None,
    }
}

/// A research hint turned into a question in the study's language.
fn hint_question(hint: &str, zh: bool) -> String {
    let hint = hint.trim().trim_end_matches(['.', '?', '。', '？']);
    if zh {
        return format!("能再多说说{hint}吗？");
    }
    let lower = hint.to_lowercase();
    let rest = ["ask for ", "ask about ", "ask ", "probe ", "find out "]
        .iter()
        .find_map(|p| lower.starts_with(p).then(|| &hint[p.len()..]))
        .unwrap_or(hint);
    let rest = rest
        .split(' ')
        .map(|w| match w {
            "they" => "you",
            "their" => "your",
            "them" => "you",
            "they're" => "you're",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(" ");
    format!("Could you tell me more about {rest}?")
}

fn generic(trigger: ProbeTrigger, zh: bool) -> &'static [&'static str] {
    use ProbeTrigger::*;
    match (trigger, zh) {
        (StrongEmotion, false) => &[
            "That sounds like it matters a lot to you. What makes it feel that way?",
            "What happened the last time it made you feel like that?",
        ],
        (StrongEmotion, true) => &["听起来这件事对你影响挺大的，是什么让你有这种感觉？", "上一次让你有这种感觉时发生了什么？"],
        (Contradiction, false) => &[
            "Earlier it sounded a little different. Could you help me understand how both fit together?",
            "When is it one way, and when the other?",
        ],
        (Contradiction, true) => &["你前面说的好像有点不一样，能帮我理解一下两种情况吗？", "什么时候是这样，什么时候是另一种情况？"],
        (Vague, false) => &[
            "Could you give me a recent, concrete example of that?",
            "Can you walk me through the last time that happened?",
            "What makes that important to you?",
        ],
        (Vague, true) => &["能举一个最近的具体例子吗？", "能说说上一次发生这种情况时的经过吗？", "这对你来说为什么重要？"],
        (MissingField, false) => &[
            "Could you tell me a bit more about that, in your own words?",
            "Is there anything else about that you would add?",
        ],
        (MissingField, true) => &["能用你自己的话再多说一点吗？", "关于这一点还有什么想补充的吗？"],
    }
}

/// The probe to ask on an objective, if its latest answer calls for one. `earlier` are the
/// objective's answers before it, `hints` the objective's probe hints, `asked` the probes
/// already asked on it; `missing` names a required field still under the threshold.
pub fn choose(
    answer: &str,
    earlier: &[&str],
    missing: Option<&str>,
    hints: &[String],
    asked: &[String],
    locale: &str,
) -> Option<Probe> {
    use ProbeTrigger::*;
    let (trigger, because) = if let Some(w) = strong_emotion(answer) {
        (StrongEmotion, format!("strong feeling in the answer ({w})"))
    } else if let Some(w) = contradiction(answer, earlier) {
        (
            Contradiction,
            format!("it contradicts an earlier answer ({w})"),
        )
    } else if let Some(why) = vague(answer) {
        (Vague, why)
    } else if let Some(field) = missing {
        (
            MissingField,
            format!("the required field {field:?} is still under the threshold"),
        )
    } else {
        return None;
    };
    let zh = locale.to_lowercase().starts_with("zh");
    let question = hints
        .iter()
        .map(|h| hint_question(h, zh))
        .chain(generic(trigger, zh).iter().map(|q| q.to_string()))
        .find(|q| !asked.contains(q))?;
    Some(Probe {
        trigger,
        because,
        question,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger(answer: &str, earlier: &[&str]) -> Option<ProbeTrigger> {
        choose(answer, earlier, None, &[], &[], "en").map(|p| p.trigger)
    }

    #[test]
    fn each_trigger_in_english_and_chinese() {
        use ProbeTrigger::*;
        assert_eq!(
            trigger("I absolutely hate the queues at the shop on Saturday", &[]),
            Some(StrongEmotion)
        );
        assert_eq!(
            trigger("周末超市排队真让人受不了", &[]),
            Some(StrongEmotion)
        );
        let earlier = ["I always write a shopping list on my phone before going"];
        assert_eq!(
            trigger(
                "Honestly I never write anything down, I just remember it on Sunday",
                &earlier
            ),
            Some(Contradiction)
        );
        assert_eq!(
            trigger(
                "我其实不用清单，都是记在脑子里，周末去超市",
                &["我每次都用清单，在手机上写好"]
            ),
            Some(Contradiction)
        );
        assert_eq!(trigger("it depends", &[]), Some(Vague));
        assert_eq!(trigger("还行吧", &[]), Some(Vague));
        // Concrete Chinese answers are not vague, whatever their length in spaces.
        assert_eq!(
            trigger("每周日晚上和家人一起在手机上列购物清单然后去超市", &[]),
            None
        );
        assert_eq!(trigger("周日晚上列清单", &[]), None);
        assert_eq!(
            choose(
                "We plan on Sunday evenings with a list",
                &[],
                Some("household_involvement"),
                &[],
                &[],
                "en"
            )
            .map(|p| p.trigger),
            Some(MissingField)
        );
        assert_eq!(
            trigger(
                "We plan on Sunday evenings together with a list on the fridge",
                &[]
            ),
            None
        );
    }

    #[test]
    fn hints_come_first_and_no_probe_is_asked_twice() {
        let hints = vec![
            "ask for the last concrete example".to_string(),
            "who else is involved in deciding".to_string(),
        ];
        let first = choose("it depends", &[], None, &hints, &[], "en").unwrap();
        assert_eq!(
            first.question,
            "Could you tell me more about the last concrete example?"
        );
        let second = choose(
            "it depends",
            &[],
            None,
            &hints,
            std::slice::from_ref(&first.question),
            "en",
        )
        .unwrap();
        assert_eq!(
            second.question,
            "Could you tell me more about who else is involved in deciding?"
        );
        let asked = vec![first.question, second.question];
        let third = choose("it depends", &[], None, &hints, &asked, "en").unwrap();
        assert_eq!(
            third.question,
            "Could you give me a recent, concrete example of that?"
        );
        assert!(third.because.contains("hedges"));
        assert_eq!(
            hint_question("ask what they tried to fix it", false),
            "Could you tell me more about what you tried to fix it?"
        );
        assert_eq!(word_count("我每周日晚上"), 3);
    }
}
