//! `bench`: drives the real server over HTTP (loopback) and prints latency percentiles and
//! throughput for session creation and participant messages, on the embedded store and on
//! PostgreSQL (`TEST_DATABASE_URL` names a server; a fresh database is created on it).
//!
//! The server runs on its own Tokio runtime in its own thread, the load generator on another, so
//! client work does not queue behind server work on the same scheduler. Run it through
//! `scripts/bench`, which builds in release mode and starts a throwaway PostgreSQL.
#![forbid(unsafe_code)]

mod across;
mod agui;
mod growth;
mod load;
mod overview;
mod realistic;
mod scale;
mod sealing;
mod stages;
mod turns;
mod wallet;

use interview_test_kit::{participant, scripted_model, widget_values};

use std::time::{Duration, Instant};

use clap::Parser;
use interview_runtime::settings::Secret;
use interview_runtime::{Application, Settings};
use serde_json::{json, Value};

#[derive(Parser)]
#[command(about = "HTTP benchmarks of the interview runtime on both stores")]
struct Args {
    /// Requests per measurement.
    #[arg(long, default_value_t = 1000)]
    requests: usize,
    /// Concurrent clients, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    concurrency: Vec<usize>,
    /// Interview turns per measurement (message → the interviewer's answer on the stream).
    #[arg(long, default_value_t = 500)]
    turns: usize,
    /// Turns at one client against the hosted-model simulation (four times as many at 16).
    #[arg(long, default_value_t = 40)]
    hosted_turns: usize,
    /// Sessions in the concurrent-load run (every widget type, racing duplicate submits).
    #[arg(long, default_value_t = 64)]
    load_sessions: usize,
    /// The release server binary, for the idle-stream memory measurement (its own process).
    #[arg(long, default_value = "target/release/interview-runtime")]
    server_binary: String,
    /// The release `replay` binary: its `rebuild --all` is timed after the in-process rebuild.
    #[arg(long, default_value = "target/release/replay")]
    replay_binary: String,
    /// Only the idle-stream memory measurement.
    #[arg(long)]
    streams_only: bool,
    /// Only commands/s against the raw INSERT rate, the storage per interview and the rebuild,
    /// per store.
    #[arg(long)]
    commands_only: bool,
    /// Only AG-UI runs (1 and 16 clients), per store.
    #[arg(long)]
    agui_only: bool,
    /// Only the interviews of 10, 20, 40 and 80 turns (per-turn latency, storage), per store.
    #[arg(long)]
    growth_only: bool,
    /// Only the first words with the stream on a second server (PostgreSQL only).
    #[arg(long)]
    across_only: bool,
    /// Only the llm path against the hosted-model simulation, per store.
    #[arg(long)]
    hosted_only: bool,
    /// Only the study overview on a study of 10,000 sessions, per store.
    #[arg(long)]
    overview_only: bool,
    /// Only the wallet run (issue 30): one address, 4 loops, 15 s, the default budgets, a model
    /// that loops on `extract_fields`; the model calls it gets, per store.
    #[arg(long)]
    wallet_only: bool,
    /// `sqlite`, `postgres` or `both`.
    #[arg(long, default_value = "both")]
    store: String,
}

struct Server {
    base: String,
    /// The database the server uses.
    url: String,
    /// The server's state (its command counter).
    state: actix_web::web::Data<interview_runtime::state::AppState>,
    /// The scripted model the server calls (its timeline of calls).
    model: scripted_model::ScriptedModel,
    _runtime_thread: std::thread::JoinHandle<()>,
}

/// The researcher token the bench's server accepts.
const RESEARCHER: &str = "bench";

/// The `llm` study the instant model answers for.
const LLM_SLUG: &str = "bench-llm";

fn start_server(database_url: Option<String>) -> Server {
    let data_dir =
        std::env::temp_dir().join(format!("interview-bench-{}", uuid::Uuid::new_v4().simple()));
    let mut settings = Settings {
        bind: "127.0.0.1:0".into(),
        database_url,
        data_dir,
        researcher_tokens: vec![Secret(RESEARCHER.into())],
        // The load generator is one address creating sessions as fast as it can.
        create_rate_per_address: 0,
        // The load generator and scripted participants come from one address, as fast as
        // they can: the per-session input rate and the shared model caps are off here.
        inputs_per_session_per_minute: 0,
        model_tokens_per_address_per_hour: 0,
        model_tokens_per_study_per_day: 0,
        model_tokens_per_day: 0,
        model_tokens_per_session: 0,
        create_rate_per_study: 0,
        ..Settings::default()
    };
    let url = settings.effective_database_url();
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            // An OpenAI-compatible endpoint that answers every request at once with a streamed
            // `ask_question` tool call: the runtime's own overhead on the llm path.
            let model = scripted_model::ScriptedModel::start().await;
            model.always(scripted_model::Reply::Tool(
                "ask_question",
                json!({"objective_id": "planning_habits", "message": "Thanks! Could you tell me a little more about how that works for you?", "rationale": "instant scripted model"}),
            ));
            realistic::simulate(&model);
            settings.openai_base_url = Some(model.url.clone());
            let app = Application::build(settings).await.expect("server starts");
            tx.send((app.port(), app.state(), model.clone())).unwrap();
            app.run_until_stopped().await.unwrap();
        });
    });
    let (port, state, model) = rx.recv().expect("server reports its port");
    Server {
        base: format!("http://127.0.0.1:{port}"),
        url,
        state,
        model,
        _runtime_thread: handle,
    }
}

/// A fresh database on the cluster `TEST_DATABASE_URL` names, if it names one.
async fn fresh_postgres() -> Option<String> {
    std::env::var_os("TEST_DATABASE_URL")?;
    Some(interview_test_kit::fresh_postgres_database().await)
}

struct Stats {
    p50: Duration,
    p99: Duration,
    max: Duration,
    throughput: f64,
}

fn stats(mut latencies: Vec<Duration>, wall: Duration) -> Stats {
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1)];
    Stats {
        p50: at(0.50),
        p99: at(0.99),
        max: *latencies.last().unwrap(),
        throughput: latencies.len() as f64 / wall.as_secs_f64(),
    }
}

/// Runs `total` requests split over `clients` concurrent clients; `make(client, i)` sends one.
async fn measure<F, Fut>(clients: usize, total: usize, make: F) -> Stats
where
    F: Fn(usize, usize) -> Fut + Clone,
    Fut: std::future::Future<Output = ()>,
{
    let started = Instant::now();
    let per_client = total / clients;
    let runs = (0..clients).map(|c| {
        let make = make.clone();
        async move {
            let mut latencies = Vec::with_capacity(per_client);
            for i in 0..per_client {
                let t = Instant::now();
                make(c, i).await;
                latencies.push(t.elapsed());
            }
            latencies
        }
    });
    let latencies: Vec<Duration> = futures_util::future::join_all(runs)
        .await
        .into_iter()
        .flatten()
        .collect();
    stats(latencies, started.elapsed())
}

/// The demo study in `llm` mode under [`LLM_SLUG`].
async fn publish_llm_study(http: &reqwest::Client, base: &str) {
    let mut study: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    study["public_slug"] = json!(LLM_SLUG);
    study["agent"]["mode"] = json!("llm");
    publish(http, base, &study.to_string()).await;
}

/// Creates and publishes a study from its JSON definition.
pub(crate) async fn publish(http: &reqwest::Client, base: &str, definition: &str) {
    let study: Value = serde_json::from_str(definition).unwrap();
    participant::publish(http, base, RESEARCHER, &study).await;
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// One store's run: the server, its studies and warm-up, then each measurement in turn (or the
/// one a `--…-only` flag names).
// Long by design: a dispatch list, one arm per `--…-only` flag, then the whole run's
// measurements in the order the README's table reads; split, each flag's arm would be a function
// of two lines.
async fn bench_store(label: &str, database_url: Option<String>, args: &Args) {
    if args.wallet_only {
        wallet::run(label, database_url).await;
        return;
    }
    let server = start_server(database_url);
    let base = server.base.clone();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .unwrap();
    publish_llm_study(&http, &base).await;
    realistic::publish_study(&http, &base).await;
    publish(
        &http,
        &base,
        include_str!("../../examples/every-type-study.json"),
    )
    .await;
    // Warm up connections and caches.
    for _ in 0..20 {
        participant::start(&http, &base, "demo").await;
    }
    if args.hosted_only {
        realistic::run(label, &http, &base, &server.model, args.hosted_turns).await;
        return;
    }
    if args.agui_only {
        agui_runs(label, &server, &http, args).await;
        return;
    }
    if args.growth_only {
        growth::run(label, &server, &http).await;
        return;
    }
    if args.across_only {
        if label == "postgres" {
            across::run(label, &server, &http, args.turns).await;
        }
        return;
    }
    if args.overview_only {
        overview::run(label, &server, &http).await;
        return;
    }
    if args.commands_only {
        scale::commands_vs_raw(label, &server, &http, args.turns).await;
        scale::storage_per_interview(label, &server, &http).await;
        rebuild_and_export(label, &server, &http, &args.replay_binary).await;
        return;
    }
    request_rows(label, &http, &base, args).await;
    agui_runs(label, &server, &http, args).await;
    realistic::run(label, &http, &base, &server.model, args.hosted_turns).await;
    load::run(label, &server.url, &http, &base, args.load_sessions).await;
    scale::commands_vs_raw(label, &server, &http, args.turns).await;
    scale::storage_per_interview(label, &server, &http).await;
    growth::run(label, &server, &http).await;
    if label == "postgres" {
        across::run(label, &server, &http, args.turns).await;
    }
    rebuild_and_export(label, &server, &http, &args.replay_binary).await;
}

/// Latencies of the participant's requests at each concurrency: creating a session, a message
/// and its first delta (rules and llm studies), a widget submit.
async fn request_rows(label: &str, http: &reqwest::Client, base: &str, args: &Args) {
    for &clients in &args.concurrency {
        let s = measure(clients, args.requests, |_, _| {
            let (http, base) = (http.clone(), base.to_string());
            async move {
                participant::start(&http, &base, "demo").await;
            }
        })
        .await;
        row(label, "create session", clients, args.requests, &s);

        for (slug, policy) in [("demo", "rules"), (LLM_SLUG, "llm")] {
            let t = turns::run(http, base, slug, clients, args.turns).await;
            let n = t.post.len();
            row(
                label,
                &format!("message ({policy})"),
                clients,
                n,
                &stats(t.post, t.wall),
            );
            let n = t.first_delta.len();
            row(
                label,
                &format!("→ 1st delta ({policy})"),
                clients,
                n,
                &stats(t.first_delta, t.wall),
            );
            if policy == "rules" {
                let n = t.submits.len();
                row(
                    label,
                    "widget submit",
                    clients,
                    n,
                    &stats(t.submits, t.wall),
                );
            }
        }
    }
}

/// AG-UI runs at one client and at sixteen.
async fn agui_runs(label: &str, server: &Server, http: &reqwest::Client, args: &Args) {
    let base = server.base.as_str();
    // The PostgreSQL cluster's port, to measure its CPU time.
    let pg_port = server
        .url
        .strip_prefix("postgres://")
        .and_then(|rest| {
            rest.split_once('@')
                .map_or(Some(rest), |(_, host)| Some(host))
        })
        .and_then(|host| host.split(['/', '?']).next())
        .and_then(|host| host.rsplit_once(':'))
        .and_then(|(_, port)| port.parse().ok());
    agui::run(label, http, base, 1, args.turns, pg_port).await;
    agui::run(label, http, base, 16, args.turns * 4, pg_port).await;
}

/// `replay rebuild --all` (the same bulk fold) over every session the run created, and the
/// results CSV export over 10,000 result rows (synthetic: copies of one realistic row).
async fn rebuild_and_export(label: &str, server: &Server, http: &reqwest::Client, replay: &str) {
    let db = interview_projections::Db::connect(
        &server.url,
        &interview_projections::db::PoolSettings::default(),
    )
    .await
    .expect("the bench reaches the server's database");
    rebuild(label, server, &db, replay).await;
    export_csv(label, server, http, &db).await;
}

/// The in-process bulk rebuild of every session, then `replay rebuild --all` over the same.
async fn rebuild(label: &str, server: &Server, db: &interview_projections::Db, replay: &str) {
    use interview_projections as projections;
    let ids = projections::read::session_ids(db).await.unwrap();
    let projector = projections::Projector::new(db.clone());
    let started = Instant::now();
    let events = projector.rebuild_many(&ids, |_, _| {}).await.unwrap();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "\n{label}: rebuild of {} sessions, {events} events: {:.2} s, {:.0} events/s",
        ids.len(),
        secs,
        events as f64 / secs
    );
    // The tool an operator runs (its own process and allocator), over the same sessions.
    match std::process::Command::new(replay)
        .args(["rebuild", "--all", "--database-url", &server.url])
        .output()
    {
        Ok(out) if out.status.success() => println!(
            "{label}: replay rebuild --all: {}",
            String::from_utf8_lossy(&out.stdout).trim()
        ),
        Ok(out) => println!(
            "{label}: replay rebuild --all failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => println!("{label}: cannot run {replay}: {e} (scripts/bench builds it)"),
    }
}

/// The results CSV export over 10,000 result rows (synthetic: copies of one realistic row).
// Long by design: one measurement read top to bottom: find the study, write the rows (one
// realistic row's fields, written out), then time the export and print one line.
async fn export_csv(
    label: &str,
    server: &Server,
    http: &reqwest::Client,
    db: &interview_projections::Db,
) {
    let studies: Value = http
        .get(format!("{}/api/studies", server.base))
        .bearer_auth(RESEARCHER)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let study_id = studies["studies"][0]["study_id"]
        .as_str()
        .unwrap()
        .to_string();
    let fields = json!({
        "planning_method": {"field_id": "planning_method", "value": "A shared list on our phones, written on Sunday evenings", "confidence": 0.85, "evidence_turn_ids": [uuid::Uuid::new_v4()], "quote": "We plan on Sunday evenings, with a list"},
        "main_frustration": {"field_id": "main_frustration", "value": "Vegetables go bad before we eat them", "confidence": 0.9, "evidence_turn_ids": [uuid::Uuid::new_v4()], "quote": "Vegetables go bad"},
        "planning_satisfaction": {"field_id": "planning_satisfaction", "value": 2, "confidence": 1.0, "evidence_turn_ids": [uuid::Uuid::new_v4()], "quote": null}
    });
    let rows = 10_000;
    interview_projections::on_db!(write(db), |pool| {
        let mut tx = pool.begin().await.unwrap();
        for i in 0..rows {
            sqlx::query(
                "INSERT INTO results (session_id, study_id, participant_ref, completed_at, end_reason, summary, summary_confirmed, fields, last_seq) \
                 VALUES ($1, $2, $3, $4, 'all_must_objectives_covered', 'A short summary, with \"quotes\"', TRUE, $5, 40)",
            )
            .bind(format!("bench-{i:06}"))
            .bind(&study_id)
            .bind(format!("panel-{i}"))
            .bind(chrono_now())
            .bind(fields.clone())
            .execute(&mut *tx)
            .await
            .unwrap();
        }
        tx.commit().await.unwrap();
    });
    let started = Instant::now();
    let csv = http
        .get(format!(
            "{}/api/studies/{study_id}/results.csv",
            server.base
        ))
        .bearer_auth(RESEARCHER)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{label}: results.csv of {rows} rows ({} KB): {:.2} s, {:.0} rows/s",
        csv.len() / 1024,
        secs,
        rows as f64 / secs
    );
}

fn chrono_now() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now()
}

fn row(store: &str, what: &str, clients: usize, n: usize, s: &Stats) {
    println!(
        "| {store:<10} | {what:<22} | {clients:>7} | {n:>8} | {:>8} | {:>8} | {:>8} | {:>10.0} |",
        ms(s.p50),
        ms(s.p99),
        ms(s.max),
        s.throughput
    );
}

fn main() {
    let args = Args::parse();
    // The server's warnings, when asked for (`RUST_LOG=warn`).
    if std::env::var_os("RUST_LOG").is_some() {
        interview_runtime::telemetry::init(interview_runtime::settings::LogFormat::Text);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        println!("| store      | measurement            | clients | samples  | p50 ms   | p99 ms   | max ms   | per s      |");
        println!("|------------|------------------------|---------|----------|----------|----------|----------|------------|");
        if args.streams_only {
            scale::idle_streams(&args.server_binary).await;
            return;
        }
        if args.store == "sqlite" || args.store == "both" {
            bench_store("sqlite", None, &args).await;
        }
        if args.store == "postgres" || args.store == "both" {
            match fresh_postgres().await {
                Some(url) => bench_store("postgres", Some(url), &args).await,
                None => eprintln!("TEST_DATABASE_URL is unset: skipping PostgreSQL (scripts/bench starts one)"),
            }
        }
        if !args.commands_only
            && !args.hosted_only
            && !args.growth_only
            && !args.agui_only
            && !args.across_only
            && !args.overview_only
            && !args.wallet_only
        {
            scale::idle_streams(&args.server_binary).await;
        }
    });
    std::process::exit(0);
}
