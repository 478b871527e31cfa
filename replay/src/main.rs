//! `replay`: the auditor's tool. Everything it says comes from a session's event stream alone —
//! the database's, or a portable bundle's — and it never calls a model.
//!
//! Exit codes: 0 ok; 1 verification failed (a tampered or inconsistent stream, or read models
//! that differ from the log); 2 usage; 3 unknown session; 4 database unreachable; 5 unreadable
//! bundle.
#![forbid(unsafe_code)]

/// mimalloc rather than the system allocator: a rebuild spent about a third of its time in
/// glibc's malloc and free (docs/benchmarks.md, "The allocator"). The server keeps the system
/// allocator: with mimalloc an idle event stream took 23 KB of memory instead of 16.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A verification failure already reported: the status to end with should the output close.
static FAILED_SO_FAR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Standard output could not be written. A reader that has seen enough (`replay show … | head`)
/// ends the program quietly — with status 0, or 1 if a verification failure was already
/// reported; any other error is said, with status 74 (EX_IOERR).
fn output_failed(error: std::io::Error) -> ! {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        let failed = FAILED_SO_FAR.load(std::sync::atomic::Ordering::Relaxed);
        std::process::exit(if failed { i32::from(VERIFY_FAILED) } else { 0 });
    }
    eprintln!("error: cannot write the output: {error}");
    std::process::exit(74);
}

/// `print!` that never panics (see [`output_failed`]).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = write!(std::io::stdout(), $($arg)*) {
            crate::output_failed(e);
        }
    }};
}

/// `println!` likewise.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($arg)*) {
            crate::output_failed(e);
        }
    }};
}

mod access_log;
mod show;
mod source;
mod verify;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use interview_projections::db::PoolSettings;
use interview_projections::{read, Db, Projector};
use source::{SourceError, StoredEvent};

const VERIFY_FAILED: u8 = 1;
const USAGE: u8 = 2;
const UNKNOWN_SESSION: u8 = 3;
const DATABASE_UNREACHABLE: u8 = 4;
const BAD_BUNDLE: u8 = 5;

#[derive(Parser)]
#[command(
    name = "replay",
    version,
    about = "Show, verify, rebuild and export interview sessions from their event log"
)]
struct Cli {
    /// postgres://… or sqlite://PATH [default: sqlite://./data/interview.db].
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    database_url: Option<String>,
    /// A file holding the server's key-encryption key (docs/privacy.md), to read sessions whose
    /// content is encrypted [default: DATA_KEY from the environment, else data.key beside an
    /// embedded database, else the key PostgreSQL keeps when the server was given none].
    #[arg(long, env = "DATA_KEY_FILE", global = true)]
    data_key_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// A session's timeline: time, actor, event, and for decisions the action, rationale, model,
    /// latency and tokens.
    Show {
        #[arg(required_unless_present = "bundle")]
        session_id: Option<String>,
        /// Read a bundle file instead of the database.
        #[arg(long, conflicts_with = "session_id")]
        bundle: Option<PathBuf>,
        /// One JSON object per event.
        #[arg(long)]
        json: bool,
    },
    /// Check a session against its log: the hash chain (payload, type and version of every
    /// event), the sequence, the aggregate's rules over the stream, and every column of the
    /// stored read models (session_state, transcript, results, session_overview)
    /// against the rows rebuilt from the log; with --all, also each study's overview counts
    /// against the sum of its sessions'. Not covered: event metadata (actor, request_id) — stored beside the
    /// payload, outside the hash — and the studies table (a session pins its study's
    /// documents by content id, and each is checked against its id).
    Verify {
        #[arg(required_unless_present_any = ["all", "bundle", "access_log"])]
        session_id: Option<String>,
        #[arg(long, conflicts_with_all = ["session_id", "bundle"])]
        all: bool,
        #[arg(long, conflicts_with = "session_id")]
        bundle: Option<PathBuf>,
        /// With --bundle: the head hash the bundle must end with.
        #[arg(long, requires = "bundle")]
        expect_head: Option<String>,
        /// With a session whose participant's data was erased: a bundle of it exported before
        /// the erasure (`replay export`). Its chain must verify and each of its events must be,
        /// content erased, the erased event stored at its place: the two chains are linked.
        #[arg(long, requires = "session_id", conflicts_with_all = ["all", "bundle"])]
        erased_from: Option<PathBuf>,
        /// Check the researchers' access log instead: its hash chain from the first row to the
        /// last (an edited or deleted row breaks it); prints its length and head hash, to
        /// compare with a head kept earlier (rows cut off the end leave a shorter chain).
        #[arg(long, conflicts_with_all = ["session_id", "all", "bundle", "erased_from"])]
        access_log: bool,
        /// With --access-log: a row an auditor kept earlier, as `SEQ:HASH` (what an earlier run
        /// printed as its head); it must still be in the chain, unchanged, at its place.
        #[arg(long, requires = "access_log")]
        expect_row: Option<String>,
    },
    /// Rebuild the stored read models from the log.
    Rebuild {
        #[arg(required_unless_present = "all")]
        session_id: Option<String>,
        #[arg(long, conflicts_with = "session_id")]
        all: bool,
    },
    /// The session's state just after event N.
    At {
        session_id: String,
        #[arg(long)]
        seq: u64,
    },
    /// Write a portable bundle of the session's events; prints its head hash.
    Export {
        session_id: String,
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Re-emit the participant-visible StreamEvents in order, as the live stream sent them.
    Stream {
        #[arg(required_unless_present = "bundle")]
        session_id: Option<String>,
        #[arg(long, conflicts_with = "session_id")]
        bundle: Option<PathBuf>,
    },
}

fn fail(error: SourceError) -> ExitCode {
    eprintln!("error: {error}");
    ExitCode::from(match error {
        SourceError::UnknownSession(_) => UNKNOWN_SESSION,
        SourceError::Database(_) => DATABASE_UNREACHABLE,
        SourceError::Bundle { .. } => BAD_BUNDLE,
    })
}

/// `--data-key-file`, kept for [`open`].
static DATA_KEY_FILE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();

async fn open(url: &str, writable: bool) -> Result<Db, ExitCode> {
    let opened = if writable {
        Db::connect(url, &PoolSettings::default()).await
    } else {
        Db::open_read_only(url).await
    };
    let db = opened.map_err(|e| {
        eprintln!("error: cannot open the database: {e}");
        ExitCode::from(DATABASE_UNREACHABLE)
    })?;
    // The keys that open encrypted content; a session whose key is missing says so when read.
    let beside = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .map(|path| PathBuf::from(path).with_file_name("data.key"));
    let source = interview_projections::keys::KeySource {
        configured: std::env::var("DATA_KEY")
            .ok()
            .filter(|k| !k.trim().is_empty()),
        file: DATA_KEY_FILE.get().cloned().flatten(),
        default_file: beside,
        retired: std::env::var("DATA_KEYS_RETIRED")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(String::from)
            .collect(),
    };
    interview_projections::keys::open_for_reading(&db, &source)
        .await
        .map_err(|e| {
            eprintln!("error: {e}");
            ExitCode::from(USAGE)
        })?;
    Ok(db)
}

/// Events from the bundle if one is named, else from the database.
async fn events(
    url: &str,
    session_id: Option<&str>,
    bundle: Option<&PathBuf>,
) -> Result<Vec<StoredEvent>, ExitCode> {
    match (bundle, session_id) {
        (Some(path), _) => source::from_bundle(path).map_err(fail),
        (None, Some(id)) => {
            let db = open(url, false).await?;
            source::from_db(&db, id).await.map_err(fail)
        }
        (None, None) => Err(ExitCode::from(USAGE)),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = DATA_KEY_FILE.set(cli.data_key_file.clone());
    let url = cli
        .database_url
        .unwrap_or_else(|| "sqlite://./data/interview.db".into());
    let result = match cli.command {
        Command::Show {
            session_id,
            bundle,
            json,
        } => events(&url, session_id.as_deref(), bundle.as_ref())
            .await
            .map(|events| show::timeline(&events, json)),
        Command::Stream { session_id, bundle } => {
            run_stream(&url, session_id.as_deref(), bundle.as_ref()).await
        }
        Command::Verify {
            session_id,
            all,
            bundle,
            expect_head,
            erased_from,
            access_log,
            expect_row,
        } => match erased_from {
            None if access_log => access_log::verify(&url, expect_row.as_deref()).await,
            Some(path) => {
                run_verify_erased_from(&url, &session_id.unwrap_or_default(), &path).await
            }
            None => run_verify(&url, session_id, all, bundle, expect_head).await,
        },
        Command::Rebuild { session_id, all } => run_rebuild(&url, session_id, all).await,
        Command::At { session_id, seq } => run_at(&url, &session_id, seq).await,
        Command::Export { session_id, output } => run_export(&url, &session_id, &output).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}

/// `stream`: what the participant's event stream carried, frame by frame.
async fn run_stream(
    url: &str,
    session_id: Option<&str>,
    bundle: Option<&PathBuf>,
) -> Result<(), ExitCode> {
    let events = events(url, session_id, bundle).await?;
    let decoded = decoded_or_fail(&events)?;
    show::stream(&events, &decoded);
    Ok(())
}

/// `at`: the session as the researcher routes showed it after event `seq` — the state view with
/// the tool calls and interactions folded from the same log, the transcript, the decision log.
async fn run_at(url: &str, session_id: &str, seq: u64) -> Result<(), ExitCode> {
    let events = events(url, Some(session_id), None).await?;
    let upto: Vec<StoredEvent> = events.into_iter().filter(|e| e.sequence <= seq).collect();
    let decoded = decoded_or_fail(&upto)?;
    let (view, rows) = verify::fold_views(&upto, &decoded);
    // The fields are a view of their own (`session_fields`), not in the state document.
    let fields = serde_json::Value::Object(view.extracted_fields.clone());
    let mut view = serde_json::to_value(view).unwrap_or_default();
    view["extracted_fields"] = fields;
    let history = interview_projections::WidgetHistory::of(&decoded);
    let decisions = interview_projections::decision_log::of(
        session_id,
        upto.iter().map(|e| e.sequence).zip(&decoded),
    );
    view["tool_calls"] = serde_json::to_value(history.tool_calls).unwrap_or_default();
    view["interaction_events"] =
        serde_json::to_value(history.interaction_events).unwrap_or_default();
    let state = serde_json::json!({"sequence": seq, "session_state": view,
                                   "transcript": rows.transcript, "decision_log": decisions});
    outln!(
        "{}",
        serde_json::to_string_pretty(&state).unwrap_or_default()
    );
    Ok(())
}

/// `export`: the session's events written to a bundle, and its head hash printed; a stream that
/// does not verify is still written, and the exit code says so.
async fn run_export(url: &str, session_id: &str, output: &Path) -> Result<(), ExitCode> {
    let events = events(url, Some(session_id), None).await?;
    let (problems, head) = verify::verify_stream(&events);
    if let Err(e) = source::write_bundle(output, &events) {
        eprintln!("error: cannot write {}: {e}", output.display());
        return Err(ExitCode::from(USAGE));
    }
    if !problems.is_empty() {
        problems.iter().for_each(|p| eprintln!("warning: {p}"));
        eprintln!(
            "exported {} events, but the stream does not verify",
            events.len()
        );
        return Err(ExitCode::from(VERIFY_FAILED));
    }
    outln!("{head}");
    eprintln!("exported {} events to {}", events.len(), output.display());
    Ok(())
}

/// The events decoded through the one decode point, or the problems printed and the verify
/// failure's exit code.
fn decoded_or_fail(
    events: &[StoredEvent],
) -> Result<Vec<interview_session::SessionEvent>, ExitCode> {
    verify::decode(events).map_err(|problems| {
        problems.iter().for_each(|p| eprintln!("error: {p}"));
        ExitCode::from(VERIFY_FAILED)
    })
}

// Long by design: one verify run in the order its output prints: a bundle, or the stored sessions
// with the format note, each session's chain and views, then with --all the study overviews, then
// the totals; the failure count is carried through to the exit code.
async fn run_verify(
    url: &str,
    session_id: Option<String>,
    all: bool,
    bundle: Option<PathBuf>,
    expect_head: Option<String>,
) -> Result<(), ExitCode> {
    if let Some(path) = bundle {
        let events = source::from_bundle(&path).map_err(fail)?;
        let (mut problems, head) = verify::verify_stream(&events);
        if let Some(expected) = expect_head.filter(|e| *e != head) {
            problems.push(format!(
                "the bundle ends at {head:?}, not the expected head {expected:?}"
            ));
        }
        return report(&source::session_id(&events), &events, &head, &problems);
    }
    let db = open(url, false).await?;
    // Views written by an older fold differ from today's in form, not in substance: say so
    // before the differences are listed. (A database older than the record is format 1.)
    let format = interview_projections::view_format::stored(&db)
        .await
        .unwrap_or(1);
    if format < interview_projections::view_format::VIEW_FORMAT {
        outln!(
            "note: the stored views are in format {format}; this build folds format {}. The \
             server rebuilds them when it starts, or run `replay rebuild --all`; until then \
             their differences from a fresh fold are listed below.",
            interview_projections::view_format::VIEW_FORMAT
        );
    }
    let ids = match (session_id, all) {
        (Some(id), _) => vec![id],
        (None, _) => read::audited_session_ids(&db)
            .await
            .map_err(|e| fail(SourceError::Database(e.to_string())))?,
    };
    let mut failed = 0;
    for id in &ids {
        let events = match source::from_db(&db, id).await {
            Ok(events) => events,
            // With --all, views whose session has no log are a finding, not an error.
            Err(SourceError::UnknownSession(_)) if all => {
                let problem =
                    "read-model rows are stored for this session, but the log has no event of it"
                        .to_string();
                let _ = report(id, &[], "", &[problem]);
                failed += 1;
                continue;
            }
            Err(e) => return Err(fail(e)),
        };
        let (mut problems, head) = verify::verify_stream(&events);
        let views = verify::compare_views(&db, id, &events)
            .await
            .map_err(|e| fail(SourceError::Database(e)))?;
        problems.extend(views);
        if report(id, &events, &head, &problems).is_err() {
            failed += 1;
        }
    }
    let mut drifted = false;
    if all {
        // Each study's overview counts against the sum of its sessions' contributions.
        let drift = interview_projections::overview::drift(&db)
            .await
            .map_err(|e| fail(SourceError::Database(e.to_string())))?;
        if !drift.is_empty() {
            FAILED_SO_FAR.store(true, std::sync::atomic::Ordering::Relaxed);
            outln!("FAILED    study overviews");
            for p in &drift {
                outln!("  - {p}");
            }
        }
        drifted = !drift.is_empty();
    }
    outln!("{} session(s) checked, {failed} failed", ids.len());
    outln!("(not audited: event metadata — actor, request_id — which the hash does not cover)");
    if failed > 0 || drifted {
        Err(ExitCode::from(VERIFY_FAILED))
    } else {
        Ok(())
    }
}

/// `verify SESSION --erased-from BUNDLE`: the session verifies as stored, and its erased events
/// are the bundle's (exported before the erasure) with their content erased.
async fn run_verify_erased_from(
    url: &str,
    id: &str,
    path: &std::path::Path,
) -> Result<(), ExitCode> {
    let before = source::from_bundle(path).map_err(fail)?;
    let db = open(url, false).await?;
    let events = source::from_db(&db, id).await.map_err(fail)?;
    let (mut problems, head) = verify::verify_stream(&events);
    let link = verify::link_to_bundle(&events, &before);
    if let Err(link_problems) = &link {
        problems.extend(link_problems.iter().cloned());
    }
    report(id, &events, &head, &problems)?;
    if let Ok(line) = link {
        outln!("  {line}");
    }
    Ok(())
}

fn report(
    id: &str,
    events: &[source::StoredEvent],
    head: &str,
    problems: &[String],
) -> Result<(), ExitCode> {
    if problems.is_empty() {
        outln!("ok        {id}  ({} events, head {head})", events.len());
        for line in verify::erasure_note(events) {
            outln!("  {line}");
        }
        Ok(())
    } else {
        FAILED_SO_FAR.store(true, std::sync::atomic::Ordering::Relaxed);
        outln!("FAILED    {id}");
        for p in problems {
            outln!("  - {p}");
        }
        Err(ExitCode::from(VERIFY_FAILED))
    }
}

async fn run_rebuild(url: &str, session_id: Option<String>, all: bool) -> Result<(), ExitCode> {
    let db = open(url, true).await?;
    let single = session_id.is_some();
    let ids = match (session_id, all) {
        (Some(id), _) => vec![id],
        (None, _) => read::session_ids(&db)
            .await
            .map_err(|e| fail(SourceError::Database(e.to_string())))?,
    };
    let projector = Projector::new(db.clone());
    if !single {
        // Every session is rebuilt: the study overviews are summed again from nothing.
        projector
            .forget_overviews()
            .await
            .map_err(|e| fail(SourceError::Database(e.to_string())))?;
    }
    let bar = indicatif::ProgressBar::new(ids.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} sessions {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let started = Instant::now();
    // The bulk path: each batch of sessions read in one query, folded in memory, written once.
    let mut folded = 0u64;
    let applied = projector
        .rebuild_many(&ids, |sessions, events| {
            folded += events;
            bar.inc(sessions as u64);
            let secs = started.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!("{:.0} events/s", folded as f64 / secs));
        })
        .await
        .map_err(|e| {
            bar.finish_and_clear();
            fail(SourceError::Database(e.to_string()))
        })?;
    if applied == 0 {
        if let [id] = ids.as_slice() {
            bar.finish_and_clear();
            return Err(fail(SourceError::UnknownSession(id.clone())));
        }
    }
    bar.finish_and_clear();
    if !single {
        // Every view now follows this build's fold.
        interview_projections::view_format::record_current(&db)
            .await
            .map_err(|e| fail(SourceError::Database(e.to_string())))?;
    }
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    outln!(
        "rebuilt {} session(s), {applied} events in {:.2} s ({:.0} events/s)",
        ids.len(),
        secs,
        applied as f64 / secs
    );
    Ok(())
}
