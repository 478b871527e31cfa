//! What a participant said, condensed the way a person summarising it would (issue 29): the
//! informative clauses, not the whole answer; no fillers ("Well, honestly, I think…"), no
//! non-answers, nothing twice; spoken back to the participant ("I write" → "you write",
//! "我" → "你"). Deterministic, in the two languages the product speaks.

use crate::input_class::classify;
use crate::text::{is_cjk, normalize};

/// Openings that carry nothing — discourse markers, not hedges ("I think", "probably", "我想"
/// say how sure the participant is, and stay) — stripped from the start of a clause, repeatedly.
const OPENINGS_EN: &[&str] = &[
    "well",
    "honestly",
    "to be honest",
    "so",
    "um",
    "uh",
    "hmm",
    "you know",
    "actually",
    "basically",
    "i mean",
    "it is mostly that",
    "it's mostly that",
    "if i had to choose",
    "the thing is",
    "oh",
    "yeah",
    "and then",
    "then",
    "and",
];
const OPENINGS_ZH: &[&str] = &["嗯", "啊", "呃", "然后", "其实", "说实话", "老实说", "就是"];

/// What opens a clause that qualifies the one before it ("…every Sunday, but not for
/// groceries"): kept with it, or the summary would say the opposite.
const CONTRASTS: &[&str] = &[
    "but ",
    "not ",
    "except ",
    "only ",
    "though",
    "although ",
    "unless ",
    "不过",
    "但是",
    "但",
    "可是",
    "只是",
    "除了",
];

/// How much of an objective's answers a summary line keeps: about a sentence.
pub const MAX_WORDS: usize = 18;
/// The same for CJK text, in characters.
pub const MAX_CJK_CHARS: usize = 40;

/// Words, counting CJK text by characters (two characters a word).
fn weight(t: &str) -> usize {
    let cjk = t.chars().filter(|c| is_cjk(*c)).count();
    let latin = t
        .split_whitespace()
        .filter(|w| !w.chars().any(is_cjk))
        .count();
    latin + cjk.div_ceil(2)
}

/// Strips filler openings from a clause, repeatedly, with the punctuation after them.
fn strip_openings(clause: &str) -> &str {
    let mut rest = clause.trim();
    loop {
        let before = rest;
        for o in OPENINGS_EN {
            let Some(head) = rest.get(..o.len()) else {
                continue;
            };
            let after = &rest[o.len()..];
            if head.eq_ignore_ascii_case(o)
                && (after.is_empty() || after.starts_with([' ', ',', ';']))
            {
                rest = after.trim_start_matches([' ', ',', ';']);
            }
        }
        for o in OPENINGS_ZH {
            if let Some(after) = rest.strip_prefix(o) {
                rest = after.trim_start_matches(['，', ',', ' ']);
            }
        }
        if rest == before {
            return rest;
        }
    }
}

/// The clauses of one sentence, in order, each stripped of filler openings, without the ones
/// that carry nothing (non-answers, fillers, "you know").
fn clauses(sentence: &str) -> Vec<String> {
    split_commas(sentence)
        .into_iter()
        .flat_map(split_long)
        .map(strip_openings)
        .filter(|c| {
            let n = normalize(c);
            !n.is_empty()
                && classify(c, &[]).is_answer()
                && !matches!(n.as_str(), "you know" | "really" | "i mean" | "like")
        })
        .map(|c| c.trim().to_string())
        .collect()
}

/// A sentence cut at its commas, except between digits ("2,500").
fn split_commas(sentence: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = sentence.char_indices().collect();
    for (i, (at, c)) in chars.iter().enumerate() {
        let digit = |j: Option<&(usize, char)>| j.is_some_and(|(_, d)| d.is_ascii_digit());
        let between_digits = i > 0 && digit(chars.get(i - 1)) && digit(chars.get(i + 1));
        if matches!(c, ',' | '，' | '、') && !between_digits {
            out.push(&sentence[start..*at]);
            start = at + c.len_utf8();
        }
    }
    out.push(&sentence[start..]);
    out
}

/// A clause of more than twelve words split where a conjunction joins two of them ("… near
/// the station and I try to remember …").
fn split_long(clause: &str) -> Vec<&str> {
    if weight(clause) <= 12 || clause.chars().any(is_cjk) {
        return vec![clause];
    }
    let mut out = Vec::new();
    let mut rest = clause;
    while weight(rest) > 12 {
        let at = [" and ", " so ", " but ", " which ", " because ", " while "]
            .iter()
            .filter_map(|c| rest.find(c).map(|i| (i, c.len())))
            .filter(|(i, _)| weight(&rest[..*i]) >= 4)
            .min_by_key(|(i, _)| *i);
        let Some((i, len)) = at else {
            break;
        };
        out.push(&rest[..i]);
        rest = &rest[i + len..];
    }
    out.push(rest);
    out
}

/// The sentences of some answers, in order ("A. B; C" is three). A full stop ends a sentence
/// only before a space or the end, so "2.5 hours" and "e.g." stay whole.
fn sentences<'a>(answers: &[&'a str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    for a in answers {
        let mut start = 0;
        let chars: Vec<(usize, char)> = a.char_indices().collect();
        for (i, (at, c)) in chars.iter().enumerate() {
            let next = chars.get(i + 1).map(|(_, n)| *n);
            let ends = match c {
                '?' | '!' | ';' | '。' | '？' | '！' | '；' => true,
                '.' => next.is_none_or(char::is_whitespace),
                _ => false,
            };
            if ends {
                out.push(&a[start..*at]);
                start = at + c.len_utf8();
            }
        }
        out.push(&a[start..]);
    }
    out.retain(|s| !s.trim().is_empty());
    out
}

/// A clause's worth for a summary: the words it shares with `topic` (what the field is about),
/// then concrete detail (digits, capitalised names, CJK nouns counted by length).
fn score(clause: &str, topic: &[String]) -> usize {
    let n = normalize(clause);
    let shared = n
        .split(' ')
        .filter(|w| w.chars().count() > 3)
        .filter(|w| {
            topic
                .iter()
                .any(|t| t.trim_end_matches('s') == w.trim_end_matches('s'))
        })
        .count();
    let digits = clause.chars().filter(char::is_ascii_digit).count().min(1);
    shared * 3 + digits + weight(clause).min(8) / 4
}

/// The informative part of `answers` (what was said on one subject, in order), at most about
/// a sentence: the clause most about `topic` (a field's description) from each sentence, the
/// latest first while they fit (an addition or a correction said last is never the one left
/// out), then in the order they were said, none twice, spoken back to the participant.
// Long by design: the steps of one algorithm in order: pick each sentence's best clause, set the
// budget, keep the first and last then fill between, then order and join; the chosen clauses, the
// budget and the measure are carried from step to step.
pub fn condense(answers: &[&str], topic: &str, zh: bool) -> String {
    let topic: Vec<String> = normalize(topic)
        .split(' ')
        .filter(|w| w.chars().count() > 3)
        .map(String::from)
        .collect();
    // (position, clause) of each sentence's best clause, none twice.
    let mut best: Vec<(usize, String)> = Vec::new();
    for (at, sentence) in sentences(answers).into_iter().enumerate() {
        let clauses = clauses(sentence);
        let Some((i, top)) = clauses
            .iter()
            .enumerate()
            .max_by_key(|(i, c)| (score(c, &topic), std::cmp::Reverse(*i)))
            .map(|(i, c)| (i, c.clone()))
        else {
            continue;
        };
        // A clause that qualifies the chosen one goes with it.
        let qualifier = clauses.get(i + 1).filter(|next| {
            let lower = next.to_lowercase();
            CONTRASTS.iter().any(|c| lower.starts_with(c))
        });
        let top = match qualifier {
            Some(q) if zh => format!("{top}，{q}"),
            Some(q) => format!("{top}, {q}"),
            None => top,
        };
        best.retain(|(_, c)| normalize(c) != normalize(&top));
        best.push((at, top));
    }
    let (budget, measure): (usize, fn(&str) -> usize) = if zh {
        (MAX_CJK_CHARS, |t| t.chars().count())
    } else {
        (MAX_WORDS, weight)
    };
    let cut = |clause: &str, to: usize| -> String {
        if measure(clause) <= to {
            clause.to_string()
        } else if zh {
            clause.chars().take(to).collect::<String>() + "…"
        } else {
            clause
                .split_whitespace()
                .take(to)
                .collect::<Vec<_>>()
                .join(" ")
                + " …"
        }
    };
    // What was said first (the answer to the question) and last (an addition, a correction)
    // always; sentences between them while they fit.
    let mut kept: Vec<(usize, String)> = Vec::new();
    let share = budget;
    if let Some((at, first)) = best.first() {
        kept.push((*at, cut(first, share)));
    }
    if best.len() > 1 {
        let (at, last) = best.last().expect("more than one");
        kept.push((*at, cut(last, share)));
    }
    let mut used: usize = kept.iter().map(|(_, c)| measure(c)).sum();
    for (at, clause) in best.iter().skip(1).take(best.len().saturating_sub(2)) {
        let size = measure(clause);
        if used + size <= budget {
            kept.push((*at, clause.clone()));
            used += size;
        }
    }
    kept.sort_by_key(|(at, _)| *at);
    let picked: Vec<String> = kept.into_iter().map(|(_, c)| c).collect();
    let joined = if zh {
        picked.join("，")
    } else {
        picked.join(", ")
    };
    spoken_back(&joined, zh)
}

/// The participant's first person turned to the second ("I write my list" → "you write your
/// list", "I was" → "you were", "we" → "you"; "我" → "你"), except inside quotation marks (what
/// someone else said stays theirs) and in words like "自我".
fn spoken_back(text: &str, zh: bool) -> String {
    if zh {
        let mut out = String::with_capacity(text.len());
        let mut quoted = false;
        let mut previous = ' ';
        for c in text.chars() {
            match c {
                '“' | '「' | '『' => quoted = true,
                '”' | '」' | '』' => quoted = false,
                '"' => quoted = !quoted,
                _ => {}
            }
            out.push(if c == '我' && !quoted && previous != '自' {
                '你'
            } else {
                c
            });
            previous = c;
        }
        return out;
    }
    let mut out = String::with_capacity(text.len());
    let mut quoted = false;
    let mut word = String::new();
    let mut previous = String::new();
    let flush = |word: &mut String, previous: &mut String, out: &mut String, quoted: bool| {
        if word.is_empty() {
            return;
        }
        let turned = if quoted {
            word.clone()
        } else {
            turn_word(word, previous)
        };
        out.push_str(&turned);
        *previous = word.clone();
        word.clear();
    };
    for c in text.chars() {
        let quote = matches!(c, '"' | '“' | '”' | '「' | '」' | '『' | '』');
        if c.is_alphanumeric() || c == '\'' || c == '’' {
            word.push(c);
            continue;
        }
        flush(&mut word, &mut previous, &mut out, quoted);
        if quote {
            quoted = matches!(c, '"') && !quoted || matches!(c, '“' | '「' | '『');
            if matches!(c, '”' | '」' | '』') {
                quoted = false;
            }
        }
        out.push(c);
    }
    flush(&mut word, &mut previous, &mut out, quoted);
    out
}

/// One word of the participant's, turned to the second person; `previous` is the word before.
fn turn_word(word: &str, previous: &str) -> String {
    let after_i = matches!(previous, "I");
    let turned = match word {
        "I" | "me" => "you",
        "Me" => "You",
        "my" => "your",
        "My" => "Your",
        "mine" => "yours",
        "myself" => "yourself",
        "we" | "us" => "you",
        "We" => "You",
        "our" => "your",
        "Our" => "Your",
        "ours" => "yours",
        "ourselves" => "yourselves",
        "I'm" | "I’m" | "we're" | "we’re" => "you're",
        "I've" | "I’ve" | "we've" | "we’ve" => "you've",
        "I'd" | "I’d" | "we'd" | "we’d" => "you'd",
        "I'll" | "I’ll" | "we'll" | "we’ll" => "you'll",
        "am" if after_i => "are",
        "was" if after_i => "were",
        other => other,
    };
    turned.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fillers_and_non_answers_go_the_informative_clause_stays() {
        let short = condense(&["A list.", "Nothing more.", "A list."], "plans", false);
        assert_eq!(short, "A list");
        assert_eq!(
            condense(
                &[
                    "我每周日晚上在手机上列购物清单，按一周要做的菜来写。",
                    "没有了。"
                ],
                "怎么计划",
                true
            ),
            "你每周日晚上在手机上列购物清单"
        );
        // Each sentence gives its clause; an addition said last is kept.
        assert_eq!(
            condense(
                &["I never plan anything, I just go to the shop. Actually I always write a detailed plan every Sunday."],
                "How the participant plans purchases",
                false
            ),
            "you never plan anything, you always write a detailed plan every Sunday"
        );
    }

    #[test]
    fn meaning_survives_the_condensing() {
        let topic = "How the participant plans purchases";
        let said = |t: &str| condense(&[t], topic, false);
        assert!(
            said("I use an app on my phone every Sunday, but not for groceries.")
                .contains("but not for groceries"),
            "a qualifier stays with its clause"
        );
        assert!(said("I spend about 2.5 hours a week on it.").contains("2.5 hours"));
        assert!(said("We spend 2,500 a year on food.").contains("2,500"));
        assert_eq!(
            said("My son always asks \"can I have crisps\" at the till."),
            "Your son always asks \"can I have crisps\" at the till"
        );
        assert_eq!(
            said("I was overwhelmed by it"),
            "you were overwhelmed by it"
        );
        assert_eq!(
            said("I think we plan on Sundays"),
            "you think you plan on Sundays"
        );
        assert_eq!(
            condense(&["我想每周只去一次超市。"], "怎么计划", true),
            "你想每周只去一次超市"
        );
        assert_eq!(condense(&["我在想自我提升。"], "x", true), "你在想自我提升");
    }

    #[test]
    fn long_answers_keep_about_a_sentence_about_the_topic() {
        let said = condense(
            &["Well, honestly, I think it is mostly that, you know, every Sunday evening I sit down with my partner and we look at the calendar for the week, see who is home for dinner, and then I write a list on my phone from the meals we pick."],
            "How the participant plans purchases (list, app, memory, …)",
            false,
        );
        assert!(said.contains("list on your phone"), "{said}");
        assert!(!said.to_lowercase().contains("honestly"), "{said}");
        assert!(weight(&said) <= MAX_WORDS + 1, "{said}");
    }
}
