//! AG-UI runs as an AG-UI client drives them: each turn is one `POST …/agui` (a new user
//! message, or a `resume` answering the widget the last run was interrupted on), read to its
//! end. Per run: POST → first `TEXT_MESSAGE_CONTENT`, POST → last content, POST →
//! `RUN_FINISHED`, and the tails from the last content and from the last `TEXT_MESSAGE_END`
//! (sent when the utterance is committed) to `RUN_FINISHED` — where a timer on the server's side
//! would show.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};

/// One run's timings, from sending the POST.
struct Run {
    /// The response's head: the run's own command is committed.
    answered: Duration,
    first_content: Option<Duration>,
    last_content: Option<Duration>,
    /// The last `TEXT_MESSAGE_END` (sent once the utterance is committed).
    message_end: Option<Duration>,
    finished: Duration,
    /// The `RUN_FINISHED` event (its outcome says what the next run answers).
    end: Value,
}

async fn post_run(http: &reqwest::Client, base: &str, id: &str, token: &str, input: Value) -> Run {
    let t0 = Instant::now();
    let res = http
        .post(format!("{base}/api/sessions/{id}/agui"))
        .bearer_auth(token)
        .header("accept", "text/event-stream")
        .json(&input)
        .send()
        .await
        .unwrap();
    let answered = t0.elapsed();
    assert_eq!(
        res.status(),
        200,
        "{}",
        res.text().await.unwrap_or_default()
    );
    let (mut first_content, mut last_content, mut message_end) = (None, None, None);
    let mut body = res.bytes_stream();
    let mut buffer = String::new();
    while let Some(chunk) = body.next().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let Some(data) = block.strip_prefix("data: ") else {
                continue;
            };
            let event: Value = serde_json::from_str(data.trim_end()).unwrap();
            match event["type"].as_str().unwrap_or_default() {
                "TEXT_MESSAGE_CONTENT" => {
                    first_content.get_or_insert(t0.elapsed());
                    last_content = Some(t0.elapsed());
                }
                "TEXT_MESSAGE_END" => message_end = Some(t0.elapsed()),
                "RUN_FINISHED" => {
                    return Run {
                        answered,
                        first_content,
                        last_content,
                        message_end,
                        finished: t0.elapsed(),
                        end: event,
                    }
                }
                "RUN_ERROR" => panic!("the run failed: {event}"),
                _ => {}
            }
        }
    }
    panic!("the run ended without RUN_FINISHED");
}

/// What the next run sends after `end`: the answer to the widget it was interrupted on, or a
/// new message; `None` when the session has ended.
async fn next_input(
    http: &reqwest::Client,
    base: &str,
    id: &str,
    token: &str,
    end: &Value,
    turn: usize,
) -> Option<Value> {
    let run_id = format!("run-{turn}");
    if end["outcome"]["type"] == "interrupt" {
        let state = crate::participant::read(http, base, id, token).await;
        let pending = &state["pending_interaction"];
        return Some(json!({
            "threadId": id, "runId": run_id, "messages": [],
            "resume": [{"interruptId": pending["interaction_id"], "status": "resolved",
                        "payload": crate::widget_values::typical_value(pending)}]
        }));
    }
    if !matches!(
        end["result"]["status"].as_str(),
        Some("waiting_for_user" | "active" | "waiting_for_tool") | None
    ) {
        return None;
    }
    let text = format!("Turn {turn}: we plan on Sunday evenings with a list on the phone");
    Some(json!({
        "threadId": id, "runId": run_id,
        "messages": [{"id": format!("m-{turn}"), "role": "user", "content": text}]
    }))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn pct(mut v: Vec<Duration>, q: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 * q).ceil() as usize).saturating_sub(1)]
}

/// CPU time used so far by the PostgreSQL cluster listening on `port` (its postmaster and every
/// process it forked: backends, WAL writer, checkpointer, autovacuum), from `/proc` (user +
/// system, at 100 ticks a second). The bench's cluster runs on this machine
/// (`scripts/with-postgres`).
pub fn postgres_cpu(port: u16) -> Duration {
    struct Proc {
        pid: u32,
        ppid: u32,
        ticks: u64,
        postmaster_of_port: bool,
    }
    let mut procs = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid … utime stime (fields 14 and 15).
        let Some((comm, rest)) = stat.split_once(") ") else {
            continue;
        };
        if !comm.ends_with("(postgres") {
            continue;
        }
        let fields: Vec<&str> = rest.split(' ').collect();
        let field = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let args = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = args.split(|b| *b == 0).collect();
        let port = port.to_string();
        let postmaster_of_port = args
            .windows(2)
            .any(|w| w[0] == b"-p" && w[1] == port.as_bytes());
        procs.push(Proc {
            pid,
            ppid: field(1) as u32,
            ticks: field(11) + field(12),
            postmaster_of_port,
        });
    }
    let Some(postmaster) = procs.iter().find(|p| p.postmaster_of_port).map(|p| p.pid) else {
        return Duration::ZERO;
    };
    let ticks: u64 = procs
        .iter()
        .filter(|p| p.pid == postmaster || p.ppid == postmaster)
        .map(|p| p.ticks)
        .sum();
    Duration::from_millis(ticks * 10)
}

/// `total` runs over `clients` concurrent AG-UI clients on the demo study; prints one line
/// (with PostgreSQL's CPU time per run when `postgres` names its port).
// Long by design: one measurement read top to bottom: set-up, the concurrent clients each driving
// runs, then the timings cut into percentiles and printed as one line; the start time and the
// PostgreSQL CPU reading taken first are used in that line.
pub async fn run(
    label: &str,
    http: &reqwest::Client,
    base: &str,
    clients: usize,
    total: usize,
    postgres: Option<u16>,
) {
    let cpu_before = postgres.map(postgres_cpu);
    let stages_before = crate::stages::Snapshot::take();
    let started = Instant::now();
    let per_client = total / clients;
    let runs = (0..clients).map(|c| async move {
        let mut runs: Vec<Run> = Vec::with_capacity(per_client);
        let mut session: Option<(String, String, Value)> = None;
        let mut turn = 0;
        while runs.len() < per_client {
            turn += 1;
            let input = match &session {
                Some((id, token, end)) => next_input(http, base, id, token, end, turn).await,
                None => None,
            };
            let Some(input) = input else {
                // A fresh session: its first run only waits for the consent widget.
                let (id, token) = crate::participant::start(http, base, "demo").await;
                let first =
                    json!({"threadId": id, "runId": format!("open-{c}-{turn}"), "messages": []});
                let run = post_run(http, base, &id, &token, first).await;
                session = Some((id, token, run.end));
                continue;
            };
            let (id, token, _) = session.as_ref().unwrap();
            let run = post_run(http, base, id, token, input).await;
            session.as_mut().unwrap().2 = run.end.clone();
            runs.push(run);
        }
        runs
    });
    let runs: Vec<Run> = futures_util::future::join_all(runs)
        .await
        .into_iter()
        .flatten()
        .collect();
    let wall = started.elapsed();
    let cpu = postgres
        .zip(cpu_before)
        .map(|(port, before)| (postgres_cpu(port).saturating_sub(before)) / runs.len() as u32);
    let stages = crate::stages::Snapshot::take().since(&stages_before);
    let with_text: Vec<&Run> = runs.iter().filter(|r| r.last_content.is_some()).collect();
    let answered: Vec<Duration> = with_text.iter().map(|r| r.answered).collect();
    let answered_to_first: Vec<Duration> = with_text
        .iter()
        .filter_map(|r| r.first_content.map(|f| f - r.answered))
        .collect();
    let first: Vec<Duration> = with_text.iter().filter_map(|r| r.first_content).collect();
    let last: Vec<Duration> = with_text.iter().filter_map(|r| r.last_content).collect();
    let finished: Vec<Duration> = with_text.iter().map(|r| r.finished).collect();
    let tail: Vec<Duration> = with_text
        .iter()
        .map(|r| r.finished - r.last_content.unwrap())
        .collect();
    let after_end: Vec<Duration> = with_text
        .iter()
        .filter_map(|r| r.message_end.map(|end| r.finished - end))
        .collect();
    println!(
        "{label}: AG-UI, {clients} client(s), {} runs ({} with text): POST → first content p50 {:.2} / p99 {:.2} ms; \
         POST → last content p99 {:.2} ms; POST → RUN_FINISHED p50 {:.2} / p99 {:.2} ms; \
         last content → RUN_FINISHED p99 {:.2} ms, max {:.2} ms; TEXT_MESSAGE_END → RUN_FINISHED \
         p99 {:.2} ms; {:.1} runs/s{}",
        runs.len(),
        with_text.len(),
        ms(pct(first.clone(), 0.5)),
        ms(pct(first, 0.99)),
        ms(pct(last, 0.99)),
        ms(pct(finished.clone(), 0.5)),
        ms(pct(finished, 0.99)),
        ms(pct(tail.clone(), 0.99)),
        ms(pct(tail, 1.0)),
        ms(pct(after_end, 0.99)),
        runs.len() as f64 / wall.as_secs_f64(),
        cpu.map_or(String::new(), |c| format!(
            "; PostgreSQL CPU {:.2} ms per run",
            ms(c)
        )),
    );
    // Where the time went: the client's two halves, then the server's stages.
    println!(
        "{label}:   POST → response head (the run's command committed) p50 {:.2} / p99 {:.2} ms; \
         response head → first content p50 {:.2} / p99 {:.2} ms",
        ms(pct(answered.clone(), 0.5)),
        ms(pct(answered, 0.99)),
        ms(pct(answered_to_first.clone(), 0.5)),
        ms(pct(answered_to_first, 0.99)),
    );
    for line in stages {
        println!("{label}:   stage {line}");
    }
}
