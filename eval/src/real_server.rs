//! What must hold when the interviewer talks to a real OpenAI-compatible server running a real
//! model (issue 32): properties of the runtime, not of a small model's wit. Checked from what a
//! researcher and an operator can read — the session, `/readyz`, `/metrics` — and `replay
//! verify` over the store, with checks of our own rather than the runtime's (a fixture must not
//! share the code's assumptions).
//!
//! Per store:
//! - every session ends (completed or ended by the runtime, never stuck);
//! - every interviewer step the model was asked for is the model's decision, or a fallback whose
//!   rationale and recorded error name the failure;
//! - the endpoint's request form was found (`/readyz`), and the model answers in it with tool
//!   calls (decided or refused) at least as often as without;
//! - no participant-visible text carries an internal id, JSON, markup or a failure code;
//! - model calls per participant input stay within bounds, and no session passed its budget;
//! - `replay verify --all` passes;
//! - the model's share of the interviewer's decisions (counted per interview: in its own words,
//!   in the runtime's when only its words were refused, or the rules' step), reported per store
//!   and held across the stores: more than half; and the words participants read from the
//!   model's own steps.

use std::collections::BTreeMap;

use interview_runtime::interviewer::reworded::WORDED_BY_RUNTIME;
use serde_json::Value;

use crate::drive::Record;
use crate::{Server, RESEARCHER};

/// One store's run.
pub struct StoreRun {
    store: String,
    /// Per interview: persona, session, the model's decisions, fallbacks, runtime's own.
    interviews: Vec<Counted>,
    checks: Vec<(&'static str, Result<(), String>)>,
    form: Value,
}

struct Counted {
    persona: String,
    session_id: String,
    status: String,
    /// The model's decisions said in its own words.
    model: usize,
    /// The model's decisions said in the runtime's words (its own were refused).
    worded: usize,
    fallback: usize,
    refused: usize,
    errors: BTreeMap<String, usize>,
    /// The first message of each code, for the report.
    messages: BTreeMap<String, String>,
    /// What the participant read from the model's own steps: each decision's next interviewer
    /// turn (the report shows the model's words, so its share is read with its quality).
    said: Vec<String>,
}

/// Calls per participant input allowed on average: a step (and its unstreamed retry, once),
/// an extraction alongside, a screening verdict now and then.
const CALLS_PER_INPUT: f64 = 3.0;

/// Of the interviewer's steps the model was asked for, the share it should decide itself (the
/// aim, reported).
const MODEL_SHARE: f64 = 0.5;

/// Whether a decision is an interviewer step (not an extraction, not a consent or screening
/// widget, not the closing the runtime says itself).
fn is_step(d: &Value) -> bool {
    let action = d["selected_action"]
        .as_str()
        .or_else(|| d["selected_action"]["type"].as_str())
        .unwrap_or_default();
    !matches!(action, "extract_fields" | "ExtractFields")
        && !d["phase"].as_str().unwrap_or_default().contains("EXTRACT")
}

/// A step whose model was asked: the model's own, or one made in its place, which names the
/// model in its rationale ("Fallback after a model failure (…)", "the model's text contained
/// …", "The model's call broke off …") or carries the refused proposal.
/// A step the rules made past a limit (the turn's three calls, a budget, a cap: "… is spent")
/// was not asked of the model.
fn asked_the_model(d: &Value) -> bool {
    let model = d["model"].as_str().unwrap_or_default();
    let why = d["rationale"].as_str().unwrap_or_default().to_lowercase();
    let past_a_limit = why.contains("(the limit per turn)") || why.contains(") is spent");
    model != "rules"
        || (why.contains("model") && !past_a_limit)
        || d["refused_proposal"].is_object()
}

// Long by design: one interview tallied in one pass: the zeroed tally, each model step sorted into
// one of four kinds (refused, rules' fallback, runtime's words, the model's own with its words),
// then the recorded errors counted by code.
fn count(r: &Record) -> Counted {
    let decisions = r.session["decision_log"]
        .as_array()
        .or_else(|| r.session["researcher"]["decision_log"].as_array())
        .cloned()
        .unwrap_or_default();
    let mut c = Counted {
        persona: r.persona.name.to_string(),
        session_id: r.session_id.clone(),
        status: r.session["status"].as_str().unwrap_or_default().to_string(),
        model: 0,
        worded: 0,
        fallback: 0,
        refused: 0,
        errors: BTreeMap::new(),
        messages: BTreeMap::new(),
        said: Vec::new(),
    };
    let transcript: Vec<&Value> = r.session["transcript"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    // A decision names the turn it follows; its words are the next interviewer turn after it.
    let words_after = |turn: Option<&str>| {
        let from = turn
            .and_then(|id| transcript.iter().position(|t| t["turn_id"] == id))
            .map_or(0, |i| i + 1);
        transcript[from.min(transcript.len())..]
            .iter()
            .find(|t| t["role"] == "assistant")
            .and_then(|t| t["content"].as_str())
            .map(String::from)
    };
    for d in decisions
        .iter()
        .filter(|d| is_step(d) && asked_the_model(d))
    {
        if d["refused_proposal"].is_object() {
            c.refused += 1;
        } else if d["model"] == "rules" {
            c.fallback += 1;
        } else if d["rationale"]
            .as_str()
            .is_some_and(|r| r.starts_with(WORDED_BY_RUNTIME))
        {
            c.worded += 1;
        } else {
            c.model += 1;
            c.said.extend(words_after(d["turn_id"].as_str()));
        }
    }
    for e in r.session["errors"].as_array().into_iter().flatten() {
        let code = e["code"].as_str().unwrap_or_default().to_string();
        let message = e["message"].as_str().unwrap_or_default();
        c.messages
            .entry(code.clone())
            .or_insert_with(|| message.chars().take(240).collect());
        *c.errors.entry(code).or_default() += 1;
    }
    c
}

/// What a participant read: every interviewer turn and every widget's words.
fn participant_visible(r: &Record) -> Vec<String> {
    let mut out: Vec<String> = r.session["transcript"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["role"] == "assistant")
        .filter_map(|t| t["content"].as_str().map(String::from))
        .collect();
    out.extend(r.summaries.iter().cloned());
    out
}

/// What no participant should read: the study's internal ids, JSON, markup, failure codes,
/// schema words.
fn leak_in(text: &str, r: &Record) -> Option<String> {
    let ids = r.definition["objectives"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(
            r.definition["output_schema"]["fields"]
                .as_array()
                .into_iter()
                .flatten(),
        )
        .filter_map(|o| o["id"].as_str())
        .filter(|id| id.contains('_'));
    for id in ids {
        if text.contains(id) {
            return Some(format!("the internal id {id}"));
        }
    }
    let lower = text.to_lowercase();
    for marker in [
        "{\"",
        "\"}",
        "\":",
        "</",
        "/>",
        "```",
        "model_",
        "field_id",
        "objective_id",
        "confidence",
        "evidence_turn",
        "tool_call",
        "&#34;",
        "&quot;",
        "null,",
        "[must]",
        "(string",
        "tools offered",
        "plain text",
        "exactly one call",
        "rationale",
        "participant_input",
        "following functions",
        "()",
    ] {
        if lower.contains(marker) {
            return Some(format!("{marker:?}"));
        }
    }
    None
}

async fn text_of(server: &Server, path: &str) -> String {
    match server
        .http
        .get(format!("{}{path}", server.base))
        .bearer_auth(RESEARCHER)
        .send()
        .await
    {
        Ok(res) => res.text().await.unwrap_or_default(),
        Err(e) => format!("unreachable: {e}"),
    }
}

/// The sum of a counter's samples in a Prometheus text page.
fn counter_sum(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter(|l| l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The checks of one store's run.
/// The model calls counted so far. The metrics recorder is the process's, shared by every
/// store's server in this run: a store's calls are the difference from before its interviews.
pub async fn calls_so_far(server: &Server) -> f64 {
    counter_sum(
        &text_of(server, "/metrics").await,
        "interview_model_calls_total",
    )
}

// Long by design: the checks R1 to R7 for one store, in the order the module doc lists them, each a
// few lines building its list of problems; several share the per-interview counts made at the top.
pub async fn check(
    server: &Server,
    store: &str,
    records: &[Record],
    calls_before: f64,
) -> StoreRun {
    let interviews: Vec<Counted> = records.iter().map(count).collect();
    let mut checks = Vec::new();

    let stuck: Vec<String> = interviews
        .iter()
        .filter(|c| !matches!(c.status.as_str(), "completed" | "abandoned"))
        .map(|c| format!("{} is {}", c.session_id, c.status))
        .collect();
    checks.push(("R1 every session ends", verdict(stuck)));

    // Each step made in the model's place, or said in the runtime's words, has its failure
    // recorded (source `model` or `guard`): at least as many recorded failures as such steps,
    // per session.
    let unexplained: Vec<String> = records
        .iter()
        .zip(&interviews)
        .filter_map(|(r, c)| {
            let recorded = r.session["errors"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|e| matches!(e["source"].as_str(), Some("model" | "guard")))
                .count();
            let replaced = c.fallback + c.refused + c.worded;
            (recorded < replaced).then(|| {
                format!(
                    "{}: {replaced} steps made in the model's place, {recorded} failures recorded",
                    r.session_id
                )
            })
        })
        .collect();
    checks.push((
        "R2 every model step is a decision or a recorded failure",
        verdict(unexplained),
    ));

    let ready: Value = serde_json::from_str(&text_of(server, "/readyz").await).unwrap_or_default();
    let form = ready["model"].clone();
    let model_decisions: usize = interviews.iter().map(|c| c.model).sum();
    // What R3 holds is that the model's answers arrive as tool calls in the form found (the
    // runtime once got none in 156 calls): its own decisions and the calls the guards or the
    // text checks refused count, the calls that brought no tool call count against. Whether
    // a 135M model's calls then stand is R7's question (between 0 and 3 of 8 from run to run).
    let count = |codes: &[&str]| -> usize {
        interviews
            .iter()
            .map(|c| codes.iter().filter_map(|k| c.errors.get(*k)).sum::<usize>())
            .sum()
    };
    let tool_calls = model_decisions
        + interviews.iter().map(|c| c.refused).sum::<usize>()
        + count(&[
            "model_text_refused",
            "model_bad_arguments",
            "model_several_tools",
        ]);
    let no_tool_call = count(&[
        "model_no_tool",
        "model_empty_stream",
        "model_garbage",
        "model_http_error",
        "model_stream_error",
        "model_stream_dropped",
        "model_stalled",
        "model_timeout",
        // Cut at the output budget: plain text runs on too (the gateway counts any content).
        "model_too_long",
    ]);
    let form_found = match form["form"].as_str() {
        Some("standard" | "compatible" | "unstreamed")
            if tool_calls > 0 && tool_calls >= no_tool_call =>
        {
            Vec::new()
        }
        _ => vec![format!(
            "form {form}: {tool_calls} answers with a tool call, {no_tool_call} without"
        )],
    };
    println!("{store}: R3 {tool_calls} model answers with a tool call, {no_tool_call} without");
    checks.push(("R3 the endpoint's form is found", verdict(form_found)));

    let leaks: Vec<String> = records
        .iter()
        .flat_map(|r| {
            participant_visible(r).into_iter().filter_map(move |text| {
                leak_in(&text, r).map(|what| format!("{}: {what} in {text:?}", r.session_id))
            })
        })
        .collect();
    checks.push(("R4 nothing internal reaches a participant", verdict(leaks)));

    let calls = calls_so_far(server).await - calls_before;
    let inputs: usize = records.iter().map(|r| r.sent.len() + r.widgets.len()).sum();
    let per_input = calls / inputs.max(1) as f64;
    let over_budget: Vec<String> = interviews
        .iter()
        .filter(|c| c.errors.contains_key("model_budget_spent"))
        .map(|c| format!("{} spent its budget", c.session_id))
        .chain(
            (per_input > CALLS_PER_INPUT)
                .then(|| format!("{calls} model calls for {inputs} inputs ({per_input:.2} each)")),
        )
        .collect();
    checks.push(("R5 model calls within bounds", verdict(over_budget)));

    checks.push(("R6 replay verify --all passes", replay_verify(server)));

    let asked: usize = interviews
        .iter()
        .map(|c| c.model + c.worded + c.fallback + c.refused)
        .sum();
    let worded: usize = interviews.iter().map(|c| c.worded).sum();
    let decided = model_decisions + worded;
    let share = decided as f64 / asked.max(1) as f64;
    // Per store, reported; held across the stores (`report`). That the model answers with tool
    // calls at all is held by R3.
    let aim = format!(
        "{decided} of {asked} ({:.0} %: {model_decisions} in its own words, {worded} in the runtime's); aim: more than {:.0} %",
        share * 100.0,
        MODEL_SHARE * 100.0
    );
    println!("{store}: R7 the model's share of its steps: {aim}");
    StoreRun {
        store: store.to_string(),
        interviews,
        checks,
        form,
    }
}

fn verdict(problems: Vec<String>) -> Result<(), String> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n    "))
    }
}

/// `replay verify --all` over the store, with the replay binary built beside this one.
fn replay_verify(server: &Server) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let replay = exe.with_file_name("replay");
    let out = std::process::Command::new(&replay)
        .args(["verify", "--all"])
        .env("DATABASE_URL", &server.database)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", replay.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Prints the runs' tables; the failed checks, as failures.
// Long by design: the report printed in the order it is read: the per-interview table, what
// participants read, each store's errors and check results, then R7 across the stores; split, the
// order of the output would be harder to see.
pub fn report(runs: &[StoreRun]) -> Vec<String> {
    let mut failures = Vec::new();
    println!("\nReal model server: who decided the interviewer's steps\n");
    println!(
        "| store | persona | session | status | model's words | model's decision, runtime's words | rules' step after a failure | refused by the guards | recorded failures |"
    );
    println!("|---|---|---|---|---:|---:|---:|---:|---|");
    for run in runs {
        for c in &run.interviews {
            let errors: Vec<String> = c.errors.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                run.store,
                c.persona,
                &c.session_id[..8.min(c.session_id.len())],
                c.status,
                c.model,
                c.worded,
                c.fallback,
                c.refused,
                errors.join(", ")
            );
        }
    }
    println!("\nWhat participants read from the model's own steps:\n");
    for run in runs {
        for c in &run.interviews {
            for text in &c.said {
                let short: String = text.replace('\n', " / ").chars().take(160).collect();
                println!("- {} {}: {short}", run.store, c.persona);
            }
        }
    }
    println!();
    for run in runs {
        let mut seen = BTreeMap::new();
        for c in &run.interviews {
            for (code, message) in &c.messages {
                seen.entry(code).or_insert(message);
            }
        }
        for (code, message) in seen {
            println!("{}: {code}: {message}", run.store);
        }
        println!("{}: endpoint {}", run.store, run.form);
        for (name, result) in &run.checks {
            match result {
                Ok(()) => println!("  ok   {name}"),
                Err(why) => {
                    println!("  FAIL {name}: {why}");
                    failures.push(format!("{name} · {}: {why}", run.store));
                }
            }
        }
    }
    // R7 across the stores, held: most steps the model was asked for are its decisions. Its
    // words pass the checks or not (a tenth to four fifths of them from run to run, with every
    // check added), but a refused text no longer costs the decision the guards take
    // (`reworded.rs`), so the share follows whether the model answers with a usable tool call
    // — 21 of 24 and 14 of 20 in the runs that kept decisions (docs/llm-contract.md, R7).
    // Held across the stores, not per store: one store's two interviews are too few steps.
    let (model, worded, asked) =
        runs.iter()
            .flat_map(|run| &run.interviews)
            .fold((0, 0, 0), |(m, w, a), c| {
                (
                    m + c.model,
                    w + c.worded,
                    a + c.model + c.worded + c.fallback + c.refused,
                )
            });
    let decided = model + worded;
    let share = format!(
        "{decided} of {asked} ({model} in its own words, {worded} in the runtime's); aim: more than half"
    );
    if decided as f64 > asked as f64 * MODEL_SHARE {
        println!("  ok   R7 the model decides most of its steps across the stores: {share}");
    } else {
        println!("  FAIL R7 the model decides most of its steps across the stores: {share}");
        failures.push(format!(
            "R7 the model decides most of its steps across the stores: {share}"
        ));
    }
    failures
}
