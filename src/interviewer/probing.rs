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
//! The words: the study's `probe_hints` that fit the trigger first, turned into a question ("ask
//! for the last concrete example" → "Could you share the last concrete example?"), then generic
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
    "overwhelmed",
    "overwhelming",
    "anxious",
    "upset",
    "crying",
];
const EMOTION_ZH: &[&str] = &[
    "难过",
    "压力很大",
    "压力太大",
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
/// Negations as `text::normalize` leaves them (apostrophes gone: "doesn't" is "doesnt").
const NEGATIONS_EN: &[&str] = &[
    "not", "never", "dont", "doesnt", "didnt", "no", "isnt", "arent", "wont", "cant", "cannot",
    "hardly", "wasnt", "werent",
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

/// A word of strong feeling in the answer — not one the question itself used ("What is the most
/// frustrating part?" → "the most frustrating part is…"), not a negated one ("I don't hate
/// it"), not a wish ("I'd love an app").
fn strong_emotion(answer: &str, question: &str) -> Option<String> {
    let n = text::normalize(answer);
    let q = text::normalize(question);
    let words: Vec<&str> = n.split(' ').collect();
    let felt = |w: &str| {
        let at = words
            .iter()
            .position(|x| *x == w || (w.len() > 5 && x.contains(w)));
        let Some(at) = at else {
            return w.contains(' ') && n.contains(w) && !q.contains(w);
        };
        let before = &words[at.saturating_sub(2)..at];
        let negated = before.iter().any(|b| NEGATIONS_EN.contains(b));
        let wished = before
            .iter()
            .any(|b| matches!(*b, "id" | "would" | "wouldnt" | "might"));
        !negated && !wished && !q.split(' ').any(|x| x == words[at])
    };
    EMOTION_EN
        .iter()
        .find(|w| felt(w))
        .map(|w| w.to_string())
        .or_else(|| {
            EMOTION_ZH
                .iter()
                .find(|w| answer.contains(*w) && !question.contains(*w))
                .map(|w| w.to_string())
        })
        .or_else(|| answer.contains("!!").then(|| "!!".into()))
}

/// The clauses of a text, trimmed, without empty ones.
fn clauses_of(t: &str) -> Vec<&str> {
    t.split(['.', '!', '?', ';', ',', '。', '！', '？', '；', '，'])
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// The content words a clause negates: the words of more than three letters in the three after
/// a negation ("never plan anything" negates "plan" and "anything").
fn negated(clause: &str) -> Vec<String> {
    let words = normalized_words(clause);
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if NEGATIONS_EN.contains(&w.as_str()) {
            out.extend(
                words
                    .iter()
                    .skip(i + 1)
                    .take(3)
                    .filter(|n| n.chars().count() > 3)
                    .cloned(),
            );
        }
    }
    out
}

/// Whether two words are the same word ("plan", "plans", "planning"; not "week" and
/// "weekends"): equal, or the longer is the shorter (four letters at least) and an ending.
fn same_word(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    a == b
        || (short.len() >= 4
            && long.strip_prefix(short).is_some_and(|suffix| {
                matches!(suffix, "s" | "es" | "ed" | "d" | "ing" | "ning" | "ned")
            }))
}

/// Two halves that contradict each other: a clause that negates what another one says
/// ("I never plan anything" … "I always write a detailed plan"), inside `answer` or between it
/// and an earlier answer on the same objective. The halves in the order they were said.
fn contradiction(answer: &str, earlier: &[&str]) -> Option<(String, String)> {
    let mine = clauses_of(answer);
    let before: Vec<&str> = earlier.iter().flat_map(|e| clauses_of(e)).collect();
    for (i, clause) in mine.iter().enumerate() {
        for other in before.iter().chain(mine[..i].iter()) {
            for (neg, pos) in [(clause, other), (other, clause)] {
                // A qualification ("not at weekends though", "unless…") is no contradiction.
                let qualifies = normalized_words(neg)
                    .iter()
                    .any(|w| matches!(w.as_str(), "though" | "except" | "unless" | "without"));
                if qualifies {
                    continue;
                }
                let positive = normalized_words(pos);
                let pos_negated = negated(pos);
                let hit = negated(neg).into_iter().any(|w| {
                    positive
                        .iter()
                        .any(|p| same_word(p, &w) && !pos_negated.iter().any(|n| same_word(n, p)))
                });
                if hit {
                    return Some((other.to_string(), clause.to_string()));
                }
            }
        }
        // Chinese: a negation directly before a phrase said elsewhere (two characters at
        // least).
        // A condition ("没有清单我就会忘": without a list I forget) is no contradiction.
        let conditional = ["就", "的话", "如果", "除非"]
            .iter()
            .any(|c| clause.contains(c));
        for neg in NEGATIONS_ZH.iter().filter(|_| !conditional) {
            for (at, _) in clause.match_indices(neg) {
                let after: String = clause[at + neg.len()..].chars().take(4).collect();
                for len in (2..=after.chars().count()).rev() {
                    let phrase: String = after.chars().take(len).collect();
                    if cjk_chars(&phrase) != len {
                        continue;
                    }
                    let other = before
                        .iter()
                        .chain(mine[..i].iter())
                        .find(|e| e.contains(&phrase) && !e.contains(&format!("{neg}{phrase}")));
                    if let Some(other) = other {
                        return Some((other.to_string(), clause.to_string()));
                    }
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
        // The researcher's own verb ("追问…", "了解…") is theirs, not a question's.
        let rest = ["追问", "问问", "了解一下", "了解", "询问", "问"]
            .iter()
            .find_map(|p| hint.strip_prefix(p))
            .unwrap_or(hint);
        return format!("能再多说说{rest}吗？");
    }
    let lower = hint.to_lowercase();
    // "ask for an example" asks the participant to share one; "ask about X" to say more.
    let share = ["ask for ", "probe for ", "look for "]
        .iter()
        .find_map(|p| lower.starts_with(p).then(|| &hint[p.len()..]));
    if let Some(rest) = share {
        return format!("Could you share {}?", as_said_to_them(rest));
    }
    let rest = [
        "ask about ",
        "probe about ",
        "probe into ",
        "explore ",
        "ask ",
        "probe ",
        "find out ",
    ]
    .iter()
    .find_map(|p| lower.starts_with(p).then(|| &hint[p.len()..]))
    .unwrap_or(hint);
    format!("Could you tell me more about {}?", as_said_to_them(rest))
}

/// A hint's words about the participant turned to them ("they" → "you").
fn as_said_to_them(rest: &str) -> String {
    rest.split(' ')
        .map(|w| match w {
            "they" => "you",
            "their" => "your",
            "them" => "you",
            "they're" => "you're",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(" ")
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
            "What did that look like the last time it came up?",
        ],
        (Vague, true) => &["能举一个最近的具体例子吗？", "能说说上一次发生这种情况时的经过吗？", "最近一次遇到这种情况是什么样的？"],
        (MissingField, false) => &[
            "Could you tell me a bit more about that, in your own words?",
            "Is there anything else about that you would add?",
        ],
        (MissingField, true) => &["能用你自己的话再多说一点吗？", "关于这一点还有什么想补充的吗？"],
    }
}

/// Adverbs that may stand between "the participant" and its verb ("usually decides").
const ADVERBS: [&str; 10] = [
    "usually",
    "always",
    "often",
    "sometimes",
    "never",
    "actually",
    "really",
    "mostly",
    "also",
    "still",
];

/// A verb that followed "the participant", agreeing with "you" instead: decides → decide,
/// is → are, has → have; `None` when it needs no change.
fn agreed_with_you(verb: &str) -> Option<String> {
    match verb {
        "is" => Some("are".to_string()),
        "was" => Some("were".to_string()),
        "has" => Some("have".to_string()),
        "does" => Some("do".to_string()),
        "goes" => Some("go".to_string()),
        v if v.ends_with("xes") || v.ends_with("zes") || v.ends_with("oes") => {
            Some(v[..v.len() - 2].to_string())
        }
        v if v.ends_with("ies") => Some(format!("{}y", &v[..v.len() - 3])),
        v if v.ends_with("es")
            && (v.ends_with("ches") || v.ends_with("shes") || v.ends_with("sses")) =>
        {
            Some(v[..v.len() - 2].to_string())
        }
        v if v.ends_with('s') && !v.ends_with("ss") && v.len() > 3 => {
            Some(v[..v.len() - 1].to_string())
        }
        _ => None,
    }
}

/// The objective's description said to the participant: "the participant decides" becomes
/// "you decide" ("参与者" → "你"); empty when the study gives none.
fn addressed(description: &str, zh: bool) -> String {
    let d = description.trim().trim_end_matches(['.', '。']);
    if zh {
        return d.replace("参与者", "你").replace("受访者", "你");
    }
    let mut out: Vec<String> = Vec::new();
    let mut words = d.split(' ').peekable();
    while let Some(w) = words.next() {
        let lower = w.to_lowercase();
        if lower == "the" && words.peek().is_some_and(|n| n.starts_with("participant")) {
            let who = words.next().unwrap_or_default();
            if who.starts_with("participant's") {
                out.push("your".into());
                continue;
            }
            out.push("you".into());
            // Adverbs before the verb stay ("usually decides" → "usually decide").
            while let Some(adverb) = words
                .peek()
                .filter(|w| ADVERBS.contains(&w.to_lowercase().as_str()))
            {
                out.push(adverb.to_string());
                words.next();
            }
            // The verb that follows agrees with "you": decides → decide, is → are, has → have.
            if let Some(agreed) = words.peek().and_then(|v| agreed_with_you(v)) {
                words.next();
                out.push(agreed);
            }
            continue;
        }
        out.push(match lower.as_str() {
            "they" => "you".into(),
            "their" => "your".into(),
            "them" => "you".into(),
            _ => w.to_string(),
        });
    }
    let mut said = out.join(" ");
    if let Some(first) = said.get(..1) {
        said = first.to_lowercase() + &said[1..];
    }
    said
}

/// An objective's question said another way, for a participant who asked what it meant: what
/// the study wants to learn (its description, addressed to the participant) and a concrete way
/// in. `nth` counts the times it was already said again (a second time words it differently).
pub fn rephrase(description: &str, title: &str, nth: usize, locale: &str) -> String {
    let zh = locale.to_lowercase().starts_with("zh");
    let about = addressed(description, zh);
    // A question about what would be gets no "the last time" (nothing happened yet).
    let hypothetical = about.contains("would") || about.contains("could") || about.contains("会");
    if nth == 0 && !about.is_empty() && hypothetical {
        return if zh {
            format!("抱歉，我换个说法：我想了解的是{about}。用你自己的话说就好。")
        } else {
            format!("Sorry, let me put that another way: I'd like to hear {about}. In your own words is fine.")
        };
    }
    match (zh, nth, about.is_empty()) {
        (true, 0, false) => format!("抱歉，我换个说法：我想了解的是{about}。可以从最近的一次说起。"),
        (true, 0, true) => format!("抱歉，我换个说法：关于「{title}」，你自己的经历是怎样的？可以从最近的一次说起。"),
        (true, _, _) => format!("没关系，这里没有对错之分。关于「{title}」，想到什么都可以说说，比如最近一次的经历。"),
        (false, 0, false) => format!(
            "Sorry, let me put that another way: I'd like to hear {about}. You could start with the last time it came up."
        ),
        (false, 0, true) => format!(
            "Sorry, let me put that another way: what is your own experience with {}? You could start with the last time it came up.",
            title.to_lowercase()
        ),
        (false, _, _) => format!(
            "No problem, there are no right or wrong answers here. Anything about {} that comes to mind is useful, for example the last time it came up.",
            title.to_lowercase()
        ),
    }
}

/// Words of a negative feeling strong enough that the participant is offered to skip.
const DISTRESS: &[&str] = &[
    "stressed",
    "stressful",
    "overwhelmed",
    "anxious",
    "upset",
    "crying",
    "exhausting",
    "nightmare",
    "焦虑",
    "崩溃",
    "难过",
    "受不了",
    "压力",
];

/// Whether a hint suits a trigger: one asking for an example suits a vague answer, one asking
/// why or about feelings and what was tried suits strong feeling, one about the missing field's
/// subject suits the missing field. A hint that offers alternatives ("tools or lists") is never
/// used: a probe is no either/or question.
fn hint_fits(hint: &str, trigger: ProbeTrigger, missing: Option<&str>) -> bool {
    let h = hint.to_lowercase();
    if h.contains(" or ") || h.contains("还是") {
        return false;
    }
    let any = |words: &[&str]| words.iter().any(|w| h.contains(w));
    match trigger {
        ProbeTrigger::Vague => any(&[
            "example",
            "last time",
            "recent",
            "concrete",
            "例子",
            "最近",
            "上一次",
            "具体",
        ]),
        ProbeTrigger::StrongEmotion => any(&[
            "why",
            "feel",
            "impact",
            "affect",
            "cause",
            "为什么",
            "感受",
            "影响",
            "原因",
        ]),
        ProbeTrigger::MissingField => missing.is_some_and(|about| {
            let about = normalized_words(about);
            normalized_words(&h)
                .iter()
                .any(|w| w.chars().count() > 3 && about.iter().any(|a| same_word(a, w)))
                || (cjk_chars(&h) > 0
                    && h.chars().collect::<Vec<_>>().windows(2).any(|p| {
                        let pair: String = p.iter().collect();
                        cjk_chars(&pair) == 2 && about.iter().any(|a| a.contains(&pair))
                    }))
        }),
        ProbeTrigger::Contradiction => false,
    }
}

/// The question for a contradiction: both halves quoted, neutrally.
fn clarification(first: &str, second: &str, zh: bool) -> String {
    let (first, second) = (first.trim(), second.trim());
    if zh {
        format!("你提到「{first}」，也提到「{second}」。能帮我理解一下这两点是怎么对上的吗？")
    } else {
        format!("You said \"{first}\" and also \"{second}\". Could you help me understand how those fit together?")
    }
}

/// The probe to ask on an objective, if its latest answer calls for one. `earlier` are the
/// objective's answers before it, `hints` the objective's probe hints, `asked` the probes
/// already asked on it; `missing` names a required field still under the threshold, with its
/// description.
pub fn choose(
    answer: &str,
    earlier: &[&str],
    missing: Option<(&str, &str)>,
    hints: &[String],
    asked: &[String],
    locale: &str,
) -> Option<Probe> {
    choose_after("", answer, earlier, missing, hints, asked, locale)
}

/// [`choose`], knowing the question the answer answers (its words of feeling are the
/// question's, not the participant's).
// Long by design: a priority list where the order is the behaviour: strong feeling, then a
// contradiction, then a vague answer, then a required field still missing, each arm giving the
// trigger, the reason and any question of its own; then the first question not yet asked among its
// own, the hints and the general ones.
pub fn choose_after(
    question: &str,
    answer: &str,
    earlier: &[&str],
    missing: Option<(&str, &str)>,
    hints: &[String],
    asked: &[String],
    locale: &str,
) -> Option<Probe> {
    use ProbeTrigger::*;
    let zh = locale.to_lowercase().starts_with("zh");
    let mut own: Vec<String> = Vec::new();
    let (trigger, because) = if let Some(w) = strong_emotion(answer, question) {
        let distressed = DISTRESS.iter().any(|d| answer.to_lowercase().contains(d));
        if distressed {
            let skip = if zh {
                "如果不想细说，直接告诉我，我们就跳过这个问题。"
            } else {
                "If you'd rather not go into it, just say so and we'll move on."
            };
            own.extend(
                generic(StrongEmotion, zh)
                    .iter()
                    .map(|q| format!("{q} {skip}")),
            );
        }
        (StrongEmotion, format!("strong feeling in the answer ({w})"))
    } else if let Some((first, second)) = contradiction(answer, earlier) {
        own.push(clarification(&first, &second, zh));
        (
            Contradiction,
            format!("two things said do not fit together (\"{first}\" / \"{second}\")"),
        )
    } else if let Some(why) = vague(answer) {
        (Vague, why)
    } else if let Some((field, description)) = missing {
        let about = addressed(description, zh);
        if !about.is_empty() {
            own.push(if zh {
                format!("能再说说{about}吗？")
            } else {
                format!("Could you tell me a little about {about}?")
            });
        }
        (
            MissingField,
            format!("the required field {field:?} is still under the threshold"),
        )
    } else {
        return None;
    };
    let question = own
        .into_iter()
        .chain(hinted_then_general(
            trigger,
            hints,
            missing.map(|(_, d)| d),
            zh,
        ))
        .find(|q| !asked.contains(q))?;
    Some(Probe {
        trigger,
        because,
        question,
    })
}

/// The runtime's words for a probe of `trigger` that was decided elsewhere (a model whose own
/// words were refused): the first of the objective's fitting hints and the trigger's general
/// questions not asked yet on it, or the first general one when all were.
pub fn worded(trigger: ProbeTrigger, hints: &[String], asked: &[String], locale: &str) -> String {
    let zh = locale.to_lowercase().starts_with("zh");
    hinted_then_general(trigger, hints, None, zh)
        .find(|q| !asked.contains(q))
        .unwrap_or_else(|| generic(trigger, zh)[0].to_string())
}

/// The questions a probe of `trigger` may ask, in the order they are tried: the objective's
/// hints that fit it (and the missing field's `description`, if any), then the trigger's
/// general questions.
fn hinted_then_general<'a>(
    trigger: ProbeTrigger,
    hints: &'a [String],
    description: Option<&'a str>,
    zh: bool,
) -> impl Iterator<Item = String> + 'a {
    hints
        .iter()
        .filter(move |h| hint_fits(h, trigger, description))
        .map(move |h| hint_question(h, zh))
        .chain(generic(trigger, zh).iter().map(|q| q.to_string()))
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
                Some((
                    "household_involvement",
                    "Who else takes part in planning or buying"
                )),
                &[],
                &[],
                "en"
            )
            .map(|p| (p.trigger, p.question)),
            Some((
                MissingField,
                "Could you tell me a little about who else takes part in planning or buying?"
                    .to_string()
            ))
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
    fn a_question_said_another_way_addresses_the_participant() {
        assert_eq!(
            rephrase("How the participant decides what to buy each week and who is involved.", "Planning habits", 0, "en"),
            "Sorry, let me put that another way: I'd like to hear how you decide what to buy each week and who is involved. You could start with the last time it came up."
        );
        assert_eq!(
            addressed(
                "Which kind of help the participant would actually use.",
                false
            ),
            "which kind of help you would actually use"
        );
        assert_eq!(
            addressed("What the participant's household eats", false),
            "what your household eats"
        );
        assert_eq!(
            addressed("How the participant usually decides what to buy and where the participant goes shopping", false),
            "how you usually decide what to buy and where you go shopping"
        );
        assert_eq!(
            rephrase("参与者每周怎么决定买什么、谁一起参与。", "计划习惯", 0, "zh-CN"),
            "抱歉，我换个说法：我想了解的是你每周怎么决定买什么、谁一起参与。可以从最近的一次说起。"
        );
        assert!(rephrase("", "Pain points", 1, "en").contains("pain points"));
    }

    // Long by design: one case per way a trigger is read, each with its assertions after it: a
    // contradiction quoted, a strong feeling with a skip offered, a hint with alternatives,
    // qualifications and negations that are no contradiction, feelings that are no strong emotion,
    // distress, and consistent answers.
    #[test]
    fn probes_fit_their_trigger() {
        // A contradiction inside one answer, both halves quoted.
        let p = choose(
            "I never plan anything, I just go to the shop. Actually I always write a detailed plan every Sunday.",
            &[],
            None,
            &[],
            &[],
            "en",
        )
        .unwrap();
        assert_eq!(p.trigger, ProbeTrigger::Contradiction);
        assert_eq!(
            p.question,
            "You said \"I never plan anything\" and also \"Actually I always write a detailed plan every Sunday\". Could you help me understand how those fit together?"
        );
        // Strong feeling: its cause and impact, not the study's hint about something else; a
        // distressed participant is offered to skip.
        let hints = vec!["ask about food that goes to waste".to_string()];
        let p = choose(
            "I hate it, it is so stressful every week",
            &[],
            None,
            &hints,
            &[],
            "en",
        )
        .unwrap();
        assert_eq!(p.trigger, ProbeTrigger::StrongEmotion);
        assert!(
            p.question.contains("What makes it feel that way?"),
            "{}",
            p.question
        );
        assert!(p.question.contains("we'll move on"), "{}", p.question);
        // A hint that offers alternatives is never asked.
        let hints = vec!["tools or lists used, for example".to_string()];
        let p = choose("it depends", &[], None, &hints, &[], "en").unwrap();
        assert!(!p.question.contains(" or "), "{}", p.question);
        // Qualifications and conditions are no contradiction; negations are read as written.
        assert_eq!(
            trigger("I shop every week. Not at weekends though.", &[]),
            None
        );
        assert_eq!(trigger("我在手机上列清单，没有清单我就会忘。", &[]), None);
        assert_eq!(
            trigger(
                "My partner plans the meals on Sunday. Actually my partner doesn't plan anything, I do.",
                &[]
            ),
            Some(ProbeTrigger::Contradiction)
        );
        // A feeling the question named, a negated one or a wish is no strong emotion.
        assert_eq!(
            choose_after(
                "What is the most frustrating part of planning?",
                "The most frustrating part is that vegetables go off before we use them",
                &[],
                None,
                &[],
                &[],
                "en"
            )
            .map(|p| p.trigger),
            None
        );
        assert_ne!(
            trigger("I don't hate it, we shop on Sundays with a list", &[]),
            Some(ProbeTrigger::StrongEmotion)
        );
        assert_ne!(
            trigger("I'd love an app that tracks the fridge every day", &[]),
            Some(ProbeTrigger::StrongEmotion)
        );
        let p = choose(
            "I was overwhelmed and anxious last month, I ended up crying in the shop.",
            &[],
            None,
            &[],
            &[],
            "en",
        )
        .unwrap();
        assert!(p.question.contains("we'll move on"), "{}", p.question);
        // Consistent answers are no contradiction.
        assert_eq!(
            trigger("I plan every Sunday and I never forget the list", &[]),
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
        assert_eq!(first.question, "Could you share the last concrete example?");
        assert_eq!(
            hint_question("Probe for a recent example", false),
            "Could you share a recent example?"
        );
        assert_eq!(
            hint_question("追问最近一次的经历", true),
            "能再多说说最近一次的经历吗？"
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
        // The second hint is about something else than an example: not asked for a vague answer.
        assert_eq!(
            second.question,
            "Could you give me a recent, concrete example of that?"
        );
        assert!(second.because.contains("hedges"));
        assert_eq!(
            hint_question("ask what they tried to fix it", false),
            "Could you tell me more about what you tried to fix it?"
        );
        assert_eq!(word_count("我每周日晚上"), 3);
    }
}
