//! PostgreSQL stopped and started again under load, on a cluster of the test's own: while it is
//! down requests fail fast with 503 and `Retry-After`; when it is back the server recovers on its
//! own; every acknowledged message is in the log exactly once and no session is left waiting.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::paths;
use crate::helpers::{Store, TestApp, RESEARCHER_TOKEN};
use crate::participant::{self, Step, Words};

struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

fn as_postgres(program: &std::path::Path) -> Command {
    // initdb and postgres refuse to run as root.
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Cluster {
    fn new() -> Self {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .expect("PostgreSQL's server binaries (scripts/ensure-tools installs them)")
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|p| p.join("initdb").exists())
            .max()
            .expect("an initdb under /usr/lib/postgresql/*/bin");
        let dir =
            std::env::temp_dir().join(format!("interview-pgr-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        if is_root() {
            assert!(Command::new("chown")
                .arg("postgres:")
                .arg(&dir)
                .status()
                .unwrap()
                .success());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let ok = as_postgres(&bin.join("initdb"))
            .arg("-D")
            .arg(dir.join("data"))
            .args(["-U", "postgres", "-A", "trust", "--no-sync"])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "initdb");
        let cluster = Self { bin, dir, port };
        cluster.start();
        cluster
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn pg_ctl(&self, args: &[&str]) {
        let ok = as_postgres(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .arg("-l")
            .arg(self.dir.join("server.log"))
            .args(args)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "pg_ctl {args:?}");
    }

    fn start(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.display()
        );
        self.pg_ctl(&["-w", "start", "-o", &opts]);
    }

    /// As abrupt as a crash: no shutdown checkpoint, connections cut.
    fn crash(&self) {
        self.pg_ctl(&["-m", "immediate", "stop"]);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = as_postgres(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "stop"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Keeps one participant talking — a new interview whenever one completes — until `stop`;
/// records each acknowledged message, every status seen (with when its request was sent), and
/// the sessions used.
async fn talk(
    app: &TestApp,
    stop: &AtomicBool,
    acked: &Mutex<Vec<String>>,
    statuses: &Mutex<Vec<(Instant, u16)>>,
    used: &Mutex<Vec<String>>,
) {
    let words = Words {
        answer: "I use a list on my phone",
        at_summary: "Yes, that's right",
    };
    let mut current: Option<(String, String)> = None;
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let sent = Instant::now();
        let Some((session, token)) = current.clone() else {
            let res = app
                .post("/api/public/studies/demo/sessions", None, &json!({}))
                .await;
            statuses.lock().unwrap().push((sent, res.status().as_u16()));
            if let Ok(body) = res.json::<Value>().await {
                if let (Some(s), Some(t)) = (
                    body["session_id"].as_str(),
                    body["participant_token"].as_str(),
                ) {
                    used.lock().unwrap().push(s.to_string());
                    current = Some((s.to_string(), t.to_string()));
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        n += 1;
        if let Ok((step, codes)) =
            participant::step(&app.client, &app.address, &session, &token, n, &words).await
        {
            statuses
                .lock()
                .unwrap()
                .extend(codes.into_iter().map(|c| (sent, c)));
            match step {
                Step::Said {
                    client_message_id,
                    acknowledged: true,
                } => acked.lock().unwrap().push(client_message_id),
                Step::Ended => current = None,
                Step::Said { .. } | Step::Answered | Step::Waiting => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// Long by design: one outage in order beside a running load: PostgreSQL crashed once messages flow,
// the 503 and readiness while it is down, its restart and the server's recovery, a message
// acknowledged after it; then the statuses seen, and every session's log checked to hold each
// acknowledged message once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_under_load_loses_nothing() {
    let cluster = Cluster::new();
    let url = cluster.url();
    let app = TestApp::spawn_with(Store::Postgres, move |s| s.database_url = Some(url)).await;
    let stop = AtomicBool::new(false);
    let acked = Mutex::new(Vec::new());
    let statuses = Mutex::new(Vec::new());
    let used = Mutex::new(Vec::new());
    let recovered = Mutex::new(None);
    let load =
        futures_util::future::join_all((0..3).map(|_| talk(&app, &stop, &acked, &statuses, &used)));
    let outage = async {
        // Crash it once the load is under way.
        let deadline = Instant::now() + Duration::from_secs(30);
        while acked.lock().unwrap().len() < 2 {
            assert!(Instant::now() < deadline, "the load did not get going");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        cluster.crash();
        let crashed = Instant::now();
        // While it is down: a clear 503 with Retry-After, well within the pool's 3 s wait.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = Instant::now();
        let res = app.get("/api/studies", Some(RESEARCHER_TOKEN)).await;
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(res.headers().contains_key("retry-after"));
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], "service_unavailable");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            app.get("/readyz", None).await.status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        // Down for longer than a pooled connection may sit unused before it is pinged (1 s,
        // projections/src/store/db.rs), as any real restart is.
        tokio::time::sleep(Duration::from_millis(1_500).saturating_sub(crashed.elapsed())).await;
        cluster.start();
        // Back on its own: no restart of the server.
        let deadline = Instant::now() + Duration::from_secs(30);
        while app.get("/readyz", None).await.status() != StatusCode::OK {
            assert!(Instant::now() < deadline, "the server did not recover");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        *recovered.lock().unwrap() = Some(Instant::now());
        // And the participants carry on: a message is acknowledged after the recovery.
        let before = acked.lock().unwrap().len();
        let deadline = Instant::now() + Duration::from_secs(30);
        while acked.lock().unwrap().len() == before {
            assert!(
                Instant::now() < deadline,
                "no message acknowledged after the recovery"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        stop.store(true, Ordering::Relaxed);
    };
    tokio::join!(load, outage);
    let statuses = statuses.into_inner().unwrap();
    // Once it answers again, nobody hears of the outage: no connection that broke with it is
    // handed out (one unused since is pinged first; one used during it was dropped then).
    let recovered = recovered.into_inner().unwrap().unwrap();
    let after: Vec<u16> = statuses
        .iter()
        .filter(|(sent, _)| *sent > recovered)
        .map(|(_, status)| *status)
        .collect();
    assert!(
        !after.is_empty() && !after.contains(&503),
        "after the recovery: {after:?}"
    );
    let statuses: Vec<u16> = statuses.into_iter().map(|(_, status)| status).collect();
    assert!(
        statuses.contains(&503),
        "the load saw the outage: {statuses:?}"
    );
    assert!(
        statuses
            .iter()
            .all(|s| [200, 201, 202, 409, 503].contains(s)),
        "{statuses:?}"
    );

    let acked = acked.into_inner().unwrap();
    let mut in_log = std::collections::HashMap::new();
    for session in used.into_inner().unwrap().iter() {
        // Nobody is left waiting for the interviewer (the recovery sweep answers turns a failed
        // run left behind).
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = app.researcher_view(session).await;
            if !matches!(s["status"].as_str(), Some("created" | "active")) {
                break;
            }
            assert!(Instant::now() < deadline, "left waiting: {s}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let events = app
            .get(&paths::events(session), Some(RESEARCHER_TOKEN))
            .await
            .json::<Value>()
            .await
            .unwrap();
        for e in events["events"].as_array().unwrap() {
            if let Some(cmid) = e["payload"]["client_message_id"].as_str() {
                *in_log.entry(cmid.to_string()).or_insert(0) += 1;
            }
        }
        app.assert_stream_follows_the_rules(session).await;
    }
    assert!(!acked.is_empty());
    for cmid in &acked {
        assert_eq!(in_log.get(cmid), Some(&1), "{cmid}");
    }
}

/// PostgreSQL restarted while the server sat idle: its pooled connections all broke unseen, and
/// the first requests after it are answered as if nothing happened (a connection left unused for
/// a while is pinged before it is handed out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_while_idle_goes_unnoticed() {
    let cluster = Cluster::new();
    let url = cluster.url();
    let app = TestApp::spawn_with(Store::Postgres, move |s| s.database_url = Some(url)).await;
    let requests = || {
        futures_util::future::join_all(
            (0..8).map(|_| app.get("/api/studies", Some(RESEARCHER_TOKEN))),
        )
    };
    // Several connections in the pool, all of them idle.
    for res in requests().await {
        assert_eq!(res.status(), StatusCode::OK);
    }
    cluster.crash();
    cluster.start();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let statuses: Vec<u16> = requests()
        .await
        .iter()
        .map(|r| r.status().as_u16())
        .collect();
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
}
