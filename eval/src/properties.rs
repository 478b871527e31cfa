//! The properties of what a researcher gets, checked on each interview. Each is judged from the
//! outside — the results row, the summary the participant read, the transcript and the decision
//! log — against what the persona's author meant by each message ([`crate::personas::Kind`]),
//! never against the runtime's own classifier.

use serde_json::Value;

use crate::drive::Record;
use crate::personas::Kind;

pub enum Verdict {
    Pass,
    Fail(String),
    NotApplicable,
}

use Verdict::{Fail, NotApplicable, Pass};

fn verdict(ok: bool, why: impl FnOnce() -> String) -> Verdict {
    if ok {
        Pass
    } else {
        Fail(why())
    }
}

/// Lower-case words and CJK characters only, for containment checks that ignore punctuation.
fn plain(t: &str) -> String {
    let mut out = String::new();
    for ch in t.chars() {
        if ch.is_alphanumeric() {
            out.extend(ch.to_lowercase());
        } else if !out.ends_with(' ') {
            out.push(' ');
        }
    }
    out.trim().to_string()
}

/// Every property, with its verdict on `r`.
pub fn check(r: &Record) -> Vec<(&'static str, Verdict)> {
    let rules = r.mode == "rules";
    let only_rules = |v: Verdict| if rules { v } else { NotApplicable };
    vec![
        ("01 no non-answer in a field", no_non_answer_in_a_field(r)),
        (
            "02 every widget answer in its field",
            widget_answers_in_fields(r),
        ),
        ("03 corrections kept", corrections_kept(r)),
        (
            "04 summary: no duplicates, fillers, joins",
            only_rules(summary_clean(r)),
        ),
        (
            "05 summary: every widget answer in words",
            only_rules(summary_names_widgets(r)),
        ),
        ("06 summary: condensed", only_rules(summary_condensed(r))),
        (
            "07 no probe after a non-answer",
            only_rules(no_probe_after_non_answer(r)),
        ),
        (
            "08 a question back is rephrased",
            only_rules(question_back_rephrased(r)),
        ),
        ("09 probes fit their trigger", only_rules(probes_fit(r))),
        (
            "10 the trigger the answer calls for",
            only_rules(expected_probe(r)),
        ),
        ("11 end wishes honoured", end_wish_honoured(r)),
        ("12 no broken-off utterance", no_fragment(r)),
        ("13 the input's class on its decision", class_recorded(r)),
        (
            "14 declined, unknown, skipped told apart",
            declined_recorded(r),
        ),
        (
            "15 a field rests on answers to its objective",
            evidence_on_topic(r),
        ),
    ]
}

fn fields(r: &Record) -> Vec<(String, &Value)> {
    r.result["fields"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v)).collect())
        .unwrap_or_default()
}

fn transcript(r: &Record) -> Vec<&Value> {
    r.session["transcript"]
        .as_array()
        .map(|t| t.iter().collect())
        .unwrap_or_default()
}

fn decisions(r: &Record) -> Vec<&Value> {
    r.session["decision_log"]
        .as_array()
        .or_else(|| r.session["researcher"]["decision_log"].as_array())
        .map(|d| d.iter().collect())
        .unwrap_or_default()
}

/// The participant turn ids whose words are `text`.
fn turns_saying<'a>(r: &'a Record, text: &str) -> Vec<&'a str> {
    transcript(r)
        .into_iter()
        .filter(|t| t["role"] != "assistant" && t["content"].as_str() == Some(text))
        .filter_map(|t| t["turn_id"].as_str())
        .collect()
}

/// 1. What is no answer (a non-answer, a question back, an end wish) is in no field's value and
///    is no field's evidence.
fn no_non_answer_in_a_field(r: &Record) -> Verdict {
    let non_answers: Vec<&str> = r
        .sent
        .iter()
        .filter(|s| {
            matches!(
                s.kind,
                Kind::NonAnswer
                    | Kind::QuestionBack
                    | Kind::EndWish
                    | Kind::Confirmation
                    | Kind::Refusal
            )
        })
        .map(|s| s.text.as_str())
        .collect();
    if non_answers.is_empty() || r.result.is_null() {
        return NotApplicable;
    }
    for (id, f) in fields(r) {
        // A declined or unknown field cites the reply that said so, and holds no value.
        if f["status"] == "refused" || f["status"] == "unknown" || f["status"] == "skipped" {
            if !f["value"].is_null() {
                return Fail(format!(
                    "{id} is {} with a value: {}",
                    f["status"], f["value"]
                ));
            }
            continue;
        }
        let value = plain(&f["value"].to_string());
        for n in &non_answers {
            if value.contains(&plain(n)) {
                return Fail(format!("{id} = {} holds {n:?}", f["value"]));
            }
            let evidence = f["evidence_turn_ids"].to_string();
            if turns_saying(r, n).iter().any(|t| evidence.contains(t)) {
                return Fail(format!("{id} cites {n:?} as evidence"));
            }
        }
    }
    Pass
}

/// 2. Each answered widget is the evidence of a field of its objective holding a value.
fn widget_answers_in_fields(r: &Record) -> Verdict {
    let answered: Vec<_> = r.widgets.iter().filter(|w| !w.skipped).collect();
    if answered.is_empty() || r.result.is_null() {
        return NotApplicable;
    }
    let turns = transcript(r);
    for w in answered {
        let Some(turn) = turns
            .iter()
            .find(|t| {
                t["interaction_id"].as_str() == Some(w.interaction_id.as_str())
                    && t["role"] != "assistant"
            })
            .and_then(|t| t["turn_id"].as_str())
        else {
            return Fail(format!("the {} answer is not in the transcript", w.kind));
        };
        let filled = fields(r).into_iter().any(|(_, f)| {
            !f["value"].is_null() && f["evidence_turn_ids"].to_string().contains(turn)
        });
        if !filled {
            return Fail(format!(
                "the {} answer {:?} ({:?}) is in no field",
                w.kind, w.words, w.objective_id
            ));
        }
    }
    Pass
}

/// 3. A correction of the summary is in the fields and in the summary, and what it corrected
///    is gone from the field it corrected.
fn corrections_kept(r: &Record) -> Verdict {
    let (Some(away), Some(to)) = (r.persona.corrected_away, r.persona.corrected_to) else {
        return NotApplicable;
    };
    let holding: Vec<(String, &Value)> = fields(r)
        .into_iter()
        .filter(|(_, f)| plain(&f["value"].to_string()).contains(&plain(to)))
        .collect();
    let Some((id, f)) = holding.first() else {
        return Fail(format!(
            "no field holds the correction {to:?}: {}",
            r.result["fields"]
        ));
    };
    if plain(&f["value"].to_string()).contains(&plain(away)) && !plain(to).contains(&plain(away)) {
        // "I don't use my phone" names the phone too: only the earlier wording counts.
        let earlier = r.sent.iter().any(|s| {
            s.kind == Kind::Answer && plain(&f["value"].to_string()).contains(&plain(&s.text))
        });
        if earlier {
            return Fail(format!(
                "{id} still holds the corrected answer: {}",
                f["value"]
            ));
        }
    }
    let summary = r.result["summary"].as_str().unwrap_or_default();
    verdict(plain(summary).contains(&plain(to)), || {
        format!("the results' summary lacks the correction: {summary:?}")
    })
}

/// The lines of the last summary the participant read, without its greeting and question.
fn summary_lines(r: &Record) -> Vec<String> {
    r.summaries
        .last()
        .map(|s| {
            s.lines()
                .filter(|l| l.trim_start().starts_with('-'))
                .map(|l| l.trim_start_matches(['-', ' ']).to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// 4. No line twice, no joined answers, nothing that was no answer.
fn summary_clean(r: &Record) -> Verdict {
    let Some(summary) = r.summaries.last() else {
        return NotApplicable;
    };
    if summary.contains(" / ") {
        return Fail(format!("joined with \" / \": {summary:?}"));
    }
    let lines = summary_lines(r);
    for (i, l) in lines.iter().enumerate() {
        if lines[..i].iter().any(|m| plain(m) == plain(l)) {
            return Fail(format!("line said twice: {l:?}"));
        }
        for part in l.split(['.', ';', '。', '；']) {
            let p = plain(part);
            if !p.is_empty() && l.matches(part.trim()).count() > 1 {
                return Fail(format!("clause said twice in {l:?}"));
            }
        }
    }
    for s in &r.sent {
        if matches!(
            s.kind,
            Kind::NonAnswer
                | Kind::QuestionBack
                | Kind::EndWish
                | Kind::Confirmation
                | Kind::Refusal
        ) && plain(summary).contains(&plain(&s.text))
        {
            return Fail(format!("the summary repeats {:?}", s.text));
        }
    }
    Pass
}

/// 5. Every widget answered before the summary is in it, in the words the participant saw.
fn summary_names_widgets(r: &Record) -> Verdict {
    let Some(summary) = r.summaries.last() else {
        return NotApplicable;
    };
    let answered: Vec<_> = r.widgets.iter().filter(|w| !w.skipped).collect();
    if answered.is_empty() {
        return NotApplicable;
    }
    for w in answered {
        for word in &w.words {
            if !plain(summary).contains(&plain(word)) {
                return Fail(format!(
                    "the {} answer {word:?} is not in {summary:?}",
                    w.kind
                ));
            }
        }
    }
    Pass
}

/// 6. One line per objective at most, none longer than 40 words (80 characters of CJK text)
///    with the widget's question and answer in it.
fn summary_condensed(r: &Record) -> Verdict {
    let lines = summary_lines(r);
    if lines.is_empty() {
        return NotApplicable;
    }
    if lines.len() > r.objectives.len() {
        return Fail(format!(
            "{} lines for {} objectives: {lines:?}",
            lines.len(),
            r.objectives.len()
        ));
    }
    for l in &lines {
        let cjk = l.chars().filter(|c| *c as u32 >= 0x3040).count();
        let words = l.split_whitespace().count();
        if words > 40 || cjk > 80 {
            return Fail(format!("a line of {words} words / {cjk} characters: {l:?}"));
        }
    }
    Pass
}

/// The decisions recorded after the participant's message `text` (its first occurrence after
/// `from`), in order.
fn decisions_after<'a>(r: &'a Record, text: &str, nth: usize) -> Vec<&'a Value> {
    let times: Vec<&str> = transcript(r)
        .into_iter()
        .filter(|t| t["role"] != "assistant" && t["content"].as_str() == Some(text))
        .filter_map(|t| t["created_at"].as_str())
        .collect();
    let Some(at) = times.get(nth) else {
        return Vec::new();
    };
    decisions(r)
        .into_iter()
        .filter(|d| d["created_at"].as_str().is_some_and(|c| c > *at))
        .collect()
}

fn action(d: &Value) -> &str {
    d["selected_action"]["action"].as_str().unwrap_or_default()
}

/// Which occurrence of its words each sent message is.
fn occurrences(r: &Record) -> Vec<(usize, &crate::drive::Sent)> {
    let mut seen: Vec<&str> = Vec::new();
    r.sent
        .iter()
        .map(|s| {
            let n = seen.iter().filter(|t| **t == s.text).count();
            seen.push(&s.text);
            (n, s)
        })
        .collect()
}

/// 7. After "nothing more" on an objective, no more probing of it.
fn no_probe_after_non_answer(r: &Record) -> Verdict {
    let mut applicable = false;
    for (n, s) in occurrences(r) {
        if s.kind != Kind::NonAnswer {
            continue;
        }
        applicable = true;
        if let Some(next) = decisions_after(r, &s.text, n).first() {
            if action(next) == "probe" {
                return Fail(format!("{:?} was probed: {}", s.text, next["rationale"]));
            }
        }
    }
    if applicable {
        Pass
    } else {
        NotApplicable
    }
}

/// 8. A question back gets the question again, said another way (not a probe, not the next
///    objective), and then the answer is taken.
fn question_back_rephrased(r: &Record) -> Verdict {
    let mut applicable = false;
    for (n, s) in occurrences(r) {
        if s.kind != Kind::QuestionBack {
            continue;
        }
        applicable = true;
        let Some(next) = decisions_after(r, &s.text, n).into_iter().next() else {
            return Fail(format!("no decision after {:?}", s.text));
        };
        let same = next["selected_action"]["objective_id"].as_str() == s.objective_id.as_deref();
        if action(next) != "ask_question" || !same {
            return Fail(format!(
                "after {:?}: {} ({})",
                s.text, next["selected_action"], next["rationale"]
            ));
        }
        let opening = r
            .objectives
            .iter()
            .find(|(id, _)| Some(id.as_str()) == s.objective_id.as_deref())
            .map(|(_, q)| q.as_str());
        let said = utterance_of(r, next);
        if said.is_none() || said == opening {
            return Fail(format!("the question was not said another way: {said:?}"));
        }
    }
    if applicable {
        Pass
    } else {
        NotApplicable
    }
}

/// The interviewer's words a decision carried (its utterance in the transcript).
fn utterance_of<'a>(r: &'a Record, d: &Value) -> Option<&'a str> {
    let at = d["created_at"].as_str()?;
    transcript(r)
        .into_iter()
        .find(|t| t["role"] == "assistant" && t["created_at"].as_str().is_some_and(|c| c >= at))
        .and_then(|t| t["content"].as_str())
}

/// 9. Each probe's words fit why it was asked: feeling → its impact or cause; contradiction →
///    both halves quoted; a missing field → that field's subject; vague → a concrete example.
///    Never an either/or question.
fn probes_fit(r: &Record) -> Verdict {
    let probes: Vec<&Value> = decisions(r)
        .into_iter()
        .filter(|d| action(d) == "probe")
        .collect();
    if probes.is_empty() {
        return NotApplicable;
    }
    for d in probes {
        let trigger = d["selected_action"]["trigger"].as_str().unwrap_or_default();
        let Some(q) = utterance_of(r, d) else {
            return Fail(format!("no words for the probe {}", d["selected_action"]));
        };
        let l = q.to_lowercase();
        let any = |words: &[&str]| words.iter().any(|w| l.contains(w));
        let fits = match trigger {
            "strong_emotion" => any(&[
                "feel",
                "affect",
                "impact",
                "why",
                "what makes",
                "cause",
                "感觉",
                "影响",
                "为什么",
                "怎么会",
            ]),
            "contradiction" => q.matches(['"', '“', '「']).count() >= 2,
            "vague" => any(&["example", "last time", "recent", "例子", "上一次", "最近"]),
            "missing_field" => true,
            _ => false,
        };
        if !fits {
            return Fail(format!("a {trigger} probe asks {q:?}"));
        }
        if l.contains(" or ") || q.contains("还是") {
            return Fail(format!("an either/or probe: {q:?}"));
        }
    }
    Pass
}

/// 10. An answer written to call for a probe (a contradiction inside it, strong feeling) gets
///     that probe.
fn expected_probe(r: &Record) -> Verdict {
    let Some(trigger) = r.persona.expects_probe else {
        return NotApplicable;
    };
    let found = decisions(r)
        .into_iter()
        .any(|d| action(d) == "probe" && d["selected_action"]["trigger"] == trigger);
    verdict(found, || format!("no {trigger} probe"))
}

/// 11. After an end wish no new question: the summary, then the end, recorded as the
///     participant's wish.
fn end_wish_honoured(r: &Record) -> Verdict {
    let Some((n, wish)) = occurrences(r)
        .into_iter()
        .find(|(_, s)| s.kind == Kind::EndWish)
    else {
        return NotApplicable;
    };
    for d in decisions_after(r, &wish.text, n) {
        if matches!(action(d), "ask_question" | "probe")
            || (action(d) == "render_interaction"
                && !d["selected_action"]["objective_id"].is_null())
        {
            return Fail(format!("after {:?}: {}", wish.text, d["selected_action"]));
        }
    }
    let reason = r.session["end_reason"]
        .as_str()
        .or_else(|| r.session["researcher"]["end_reason"].as_str())
        .unwrap_or_default();
    verdict(reason == "participant_requested_end", || {
        format!("ended as {reason:?}")
    })
}

/// 12. Every interviewer message is whole: it ends as a sentence ends.
fn no_fragment(r: &Record) -> Verdict {
    for t in transcript(r) {
        if t["role"] != "assistant" || t["kind"] != "message" {
            continue;
        }
        let text = t["content"].as_str().unwrap_or_default().trim_end();
        let whole = text.ends_with(['.', '?', '!', '。', '？', '！', ')', '）', '"', '”']);
        if !whole {
            return Fail(format!("broken off: {text:?}"));
        }
    }
    Pass
}

/// 13. The decision after each message records what the message was, as its author meant it.
fn class_recorded(r: &Record) -> Verdict {
    let mut applicable = false;
    for (n, s) in occurrences(r) {
        let expected = match s.kind {
            Kind::Answer => "answer",
            Kind::NonAnswer => "non_answer",
            Kind::QuestionBack => "question_back",
            Kind::EndWish => "end_intent",
            Kind::Refusal => "refusal",
            Kind::Correction | Kind::Confirmation => continue,
        };
        let Some(turn) = turns_saying(r, &s.text).get(n).copied() else {
            continue;
        };
        let Some(decision) = decisions(r).into_iter().find(|d| d["turn_id"] == turn) else {
            return Fail(format!("no decision follows {:?}", s.text));
        };
        applicable = true;
        if decision["input_class"] != expected {
            return Fail(format!(
                "{:?} recorded as {} (meant {expected})",
                s.text, decision["input_class"]
            ));
        }
    }
    if applicable {
        Pass
    } else {
        NotApplicable
    }
}

/// 14. An objective the participant declined or could not answer has its text fields recorded
///     as `refused` / `unknown` (no value), not left empty and not filled with the reply; a
///     skipped widget's typed fields as `skipped`.
fn declined_recorded(r: &Record) -> Verdict {
    // A skipped widget's typed fields say so.
    let skipped: Vec<&str> = r
        .widgets
        .iter()
        .filter(|w| w.skipped)
        .filter_map(|w| w.objective_id.as_deref())
        .collect();
    if !skipped.is_empty() && !r.result.is_null() {
        for f in r.definition["output_schema"]["fields"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let on_skipped = f["objective_id"]
                .as_str()
                .is_some_and(|o| skipped.contains(&o));
            if on_skipped && f["type"] != "string" {
                let id = f["id"].as_str().unwrap_or_default();
                let got = &r.result["fields"][id];
                if got["status"] != "skipped" {
                    return Fail(format!("{id} should be skipped: {got}"));
                }
            }
        }
        if r.persona.declines.is_none() {
            return Pass;
        }
    }
    let Some((objective, _, _, expected)) = r.persona.declines else {
        return NotApplicable;
    };
    let Some((objective_id, _)) = r.objectives.get(objective) else {
        return NotApplicable;
    };
    let text_fields = r.text_fields_of(objective_id);
    if text_fields.is_empty() || r.result.is_null() {
        return NotApplicable;
    }
    for id in text_fields {
        let f = &r.result["fields"][id.as_str()];
        if f["status"] != expected || !f["value"].is_null() {
            return Fail(format!("{id} should be {expected}: {f}"));
        }
    }
    Pass
}

/// 15. Every answered field's evidence includes an answer to its own objective's questions (or
///     a reply to the summary): a value does not rest only on what was said about something
///     else.
fn evidence_on_topic(r: &Record) -> Verdict {
    if r.result.is_null() {
        return NotApplicable;
    }
    let objective_of_field = |id: &str| {
        r.definition["output_schema"]["fields"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| f["id"] == id)
            .and_then(|f| f["objective_id"].as_str())
            .map(String::from)
    };
    // Each participant turn's objective, as the persona meant it.
    let mut turn_objective: Vec<(String, Option<String>)> = Vec::new();
    for (n, s) in occurrences(r) {
        if matches!(s.kind, Kind::Correction | Kind::Confirmation) {
            continue;
        }
        if let Some(turn) = turns_saying(r, &s.text).get(n) {
            turn_objective.push((turn.to_string(), s.objective_id.clone()));
        }
    }
    let mut applicable = false;
    for (id, f) in fields(r) {
        let evidence: Vec<String> = f["evidence_turn_ids"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t.as_str().map(String::from))
            .collect();
        let known: Vec<&Option<String>> = evidence
            .iter()
            .filter_map(|t| turn_objective.iter().find(|(x, _)| x == t).map(|(_, o)| o))
            .collect();
        if known.is_empty() || known.len() < evidence.len() {
            continue; // widget answers and summary replies
        }
        applicable = true;
        let own = objective_of_field(&id);
        if !known.iter().any(|o| **o == own) {
            return Fail(format!(
                "{id} rests on answers about {known:?}: {}",
                f["value"]
            ));
        }
    }
    if applicable {
        Pass
    } else {
        NotApplicable
    }
}
