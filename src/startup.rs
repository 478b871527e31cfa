//! Wiring: database, event store, projector, background catch-up and the HTTP server.

use std::collections::HashSet;
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::middleware::from_fn;
use actix_web::{web, App, HttpServer};
use interview_projections::db::PoolSettings;
use interview_projections::{Db, Projector};
use interview_session::hash::sha256_hex;
use utoipa::OpenApi;
use utoipa_actix_web::AppExt;

use crate::command::store::SessionStore;
use crate::interviewer::Interviewer;
use crate::live::stream_hub::StreamHub;
use crate::llm::ModelGateway;
use crate::settings::{Secret, Settings};
use crate::state::AppState;

#[cfg(test)]
mod tests {
    #[test]
    fn userinfo_is_left_out_of_logged_urls() {
        assert_eq!(
            super::without_userinfo("https://key:secret@llm.example/v1"),
            "https://llm.example/v1"
        );
        assert_eq!(
            super::without_userinfo("http://127.0.0.1:9/v1"),
            "http://127.0.0.1:9/v1"
        );
        assert_eq!(
            super::without_userinfo("https://h/v1?a=b@c"),
            "https://h/v1?a=b@c"
        );
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    Database(#[from] interview_projections::DbError),
    #[error("RESEARCHER_TOKENS must be set when using PostgreSQL")]
    MissingResearcherTokens,
    #[error("cannot write the researcher token file {path}: {source}")]
    TokenFile {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "the researcher token file {path} can be read by other users (mode {mode:o}); \
         run `chmod 600 {path}` (or delete it to have a new token made) and start again"
    )]
    TokenFileReadable { path: String, mode: u32 },
    #[error("cannot listen on {bind}: {source}")]
    Bind {
        bind: String,
        source: std::io::Error,
    },
    #[error("start-up failed: {0}")]
    Other(String),
    #[error(transparent)]
    Keys(#[from] interview_projections::keys::KeyError),
}

pub struct Application {
    port: u16,
    server: Server,
    state: web::Data<AppState>,
    guards: web::Data<crate::http::guards::Guards>,
}

impl Application {
    /// Connects, migrates, catches projections up, publishes the demo study and binds the
    /// listener (port 0 picks a free port; [`Application::port`] tells which).
    pub async fn build(settings: Settings) -> Result<Self, StartupError> {
        crate::meters::install();
        let (state, completed) = open_state(&settings).await?;
        let listener = TcpListener::bind(&settings.bind).map_err(|source| StartupError::Bind {
            bind: settings.bind.clone(),
            source,
        })?;
        let port = listener
            .local_addr()
            .map_err(|e| StartupError::Other(e.to_string()))?
            .port();
        start_background(&state, &settings, completed).await?;
        let guards = web::Data::new(crate::http::guards::Guards::new(&settings));
        let server = serve(&settings, state.clone(), guards.clone(), listener)?;
        log_urls(&settings, port);
        Ok(Self {
            port,
            server,
            state,
            guards,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The shared state (tests use it to drive commands the HTTP API does not expose yet).
    pub fn state(&self) -> web::Data<AppState> {
        self.state.clone()
    }

    /// The HTTP layer's guards (tests read the caps' counts).
    pub fn guards(&self) -> web::Data<crate::http::guards::Guards> {
        self.guards.clone()
    }

    /// Serves until SIGTERM/SIGINT, then closes event streams (with a retry hint), refuses new
    /// requests with 503, lets in-flight ones finish (at most `SHUTDOWN_TIMEOUT_SECS`) and
    /// closes the database.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let handle = self.server.handle();
        let state = self.state.clone();
        tokio::spawn(async move {
            stop_signal().await;
            tracing::info!("stopping: event streams closed, new requests refused");
            state.draining.send_replace(true);
            handle.stop(true).await;
        });
        let result = self.server.await;
        self.state.db.close().await;
        tracing::info!("stopped");
        result
    }
}

/// The domain services on the database `settings` names: the store connected and migrated, the
/// data keys, the views brought to the current format and caught up, the demo study, the
/// command side, the interviewer. Answers the state and the stream of completed sessions the
/// extraction workers take.
// Long by design: the services built in the order they depend on each other, each taking the
// ones before it; split, the half-built services would travel between functions.
async fn open_state(
    settings: &Settings,
) -> Result<(web::Data<AppState>, CompletedSessions), StartupError> {
    let url = settings.effective_database_url();
    let pool = PoolSettings {
        max_connections: settings.db_max_connections,
        ..PoolSettings::default()
    };
    let db = Db::connect(&url, &pool).await?;
    tracing::info!(backend = db.backend(), "database ready");
    let data_kek = interview_projections::keys::start(&db, &settings.key_source()).await?;
    let tokens = researcher_tokens(settings, &db)?;
    let projector = Arc::new(Projector::new(db.clone()).with_group_commit());
    reformat_views(&projector).await?;
    projector
        .catch_up()
        .await
        .map_err(|e| StartupError::Other(format!("projection catch-up: {e}")))?;
    if settings.demo_study
        && crate::demo::ensure_demo_study(&db)
            .await
            .map_err(|e| StartupError::Other(format!("demo study: {e}")))?
    {
        tracing::info!("published the demo study");
    }
    let hub = Arc::new(StreamHub::default());
    // Sessions that complete, for the post-session extraction's workers.
    let (completed_tx, completed) = tokio::sync::mpsc::unbounded_channel();
    let store = Arc::new(SessionStore::new(
        &db,
        projector.clone(),
        hub.clone(),
        vec![Box::new(crate::jobs::extraction::Completions(completed_tx))],
        data_kek.clone(),
    ));
    let interviewer = Arc::new(
        Interviewer::new(
            db.clone(),
            store.clone(),
            hub.clone(),
            model_gateway(settings),
        )
        .with_model_limits(crate::interviewer::budget::Limits {
            per_day: settings.model_tokens_per_day,
            per_study_per_day: settings.model_tokens_per_study_per_day,
            per_session: settings.model_tokens_per_session,
            per_address_per_hour: settings.model_tokens_per_address_per_hour,
        }),
    );
    if let Db::Postgres(pool) = &db {
        let peers = projector.peers().clone();
        hub.relay_words(crate::live::across::Relay::start(
            pool.clone(),
            peers.clone(),
        ));
        let listening = crate::live::across::spawn_pg_listener(pool.clone(), hub.clone(), peers);
        // Served only once the others have been told this process listens (their commits are
        // announced to it from then on); a database that refuses LISTEN delays the start by at
        // most this, and meanwhile every commit is announced.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), listening).await;
    }
    let state = web::Data::new(AppState {
        db,
        store,
        interviewer,
        projector,
        hub,
        researcher_token_digests: tokens,
        sso: settings.oidc.clone().map(|oidc| {
            let sso = Arc::new(crate::access::sso::Sso::new(oidc));
            // Fetched now, not awaited: a provider that is away does not keep the server down
            // (its keys are fetched again when a token needs them).
            let fetching = sso.clone();
            tokio::spawn(async move { fetching.refresh().await });
            sso
        }),
        data_kek,
        participant_token_digests: std::sync::Mutex::new(hashlink::LruCache::new(10_000)),
        study_locks: Default::default(),
        readiness: tokio::sync::Mutex::new(None),
        draining: tokio::sync::watch::Sender::new(false),
        settings: settings.clone(),
    });
    Ok((state, completed))
}

/// Sessions that completed, as the extraction workers receive them.
type CompletedSessions = tokio::sync::mpsc::UnboundedReceiver<String>;

/// The model client, when an endpoint is configured (studies in `llm` mode call it).
fn model_gateway(settings: &Settings) -> Option<Arc<ModelGateway>> {
    settings.openai_base_url.as_deref().map(|url| {
        let shown = without_userinfo(url);
        tracing::info!(url = %shown, "model endpoint configured for studies in llm mode");
        Arc::new(ModelGateway::new(
            url,
            settings.openai_api_key.as_ref().map(|k| k.0.as_str()),
            Duration::from_secs(settings.model_idle_timeout_secs.max(1)),
            settings.model_max_concurrent_requests,
        ))
    })
}

/// The background work: the views' catch-up, this process in the registry, the interviewer's
/// schedule, turns a dead process left unanswered (answered now; later ones by the sweep), the
/// sweeper, the post-session extraction and the webhooks' delivery.
async fn start_background(
    state: &web::Data<AppState>,
    settings: &Settings,
    completed: CompletedSessions,
) -> Result<(), StartupError> {
    spawn_catch_up(state.clone(), settings.catch_up_interval_secs);
    interview_projections::processes::beat(
        &state.db,
        state.interviewer.process_id(),
        chrono::Utc::now(),
    )
    .await
    .map_err(|e| StartupError::Other(format!("process registry: {e}")))?;
    crate::interviewer::schedule::spawn_background(state.interviewer.clone(), state.db.clone());
    match state.interviewer.recover(false).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(sessions = n, "answering turns left unanswered"),
        Err(error) => tracing::warn!(%error, "start-up recovery failed; the sweep will retry"),
    }
    crate::jobs::sweeper::spawn(state.clone(), settings.sweep_interval_secs);
    crate::jobs::extraction::spawn(state.clone(), settings.sweep_interval_secs, completed);
    crate::webhooks::delivery::Deliverer::new(
        state.db.clone(),
        settings.webhooks.clone(),
        state.interviewer.process_id().to_string(),
    )
    .spawn();
    Ok(())
}

/// The HTTP server on `listener`: the routes and the OpenAPI document, inside the door, CORS,
/// the error envelope and the request span, with the connection cap and the timeouts.
fn serve(
    settings: &Settings,
    app_state: web::Data<AppState>,
    app_guards: web::Data<crate::http::guards::Guards>,
    listener: TcpListener,
) -> Result<Server, StartupError> {
    let origins = settings.cors_allowed_origins.clone();
    let connections = crate::http::door::ConnectionCap::new(
        settings.max_connections_per_address,
        settings.connection_cap_exempt.clone(),
    );
    let server = HttpServer::new(move || {
        // Innermost first: the door (bodies, caps, content types), CORS, then the error
        // envelope around both (so their refusals are JSON too), the request span outside.
        App::new()
            .into_utoipa_app()
            .openapi(crate::http::openapi::ApiDoc::openapi())
            .app_data(app_state.clone())
            .app_data(app_guards.clone())
            .configure(crate::http::routes::configure)
            .openapi_service(crate::http::openapi::serve)
            .default_service(web::to(crate::http::routes::not_found))
            .into_app()
            .wrap(from_fn(crate::http::access_log::record))
            .wrap(from_fn(crate::http::door::door))
            .wrap(cors(&origins))
            .wrap(from_fn(crate::http::error::envelope))
            .wrap(from_fn(crate::telemetry::request_span))
            .wrap(
                actix_web::middleware::DefaultHeaders::new()
                    .add(("x-content-type-options", "nosniff")),
            )
    })
    .on_connect(move |conn, data| crate::http::door::on_connect(&connections, conn, data))
    // Headers must arrive within 5 s of connecting (actix-web's own timeout), bodies
    // within BODY_READ_TIMEOUT_SECS (the door).
    .client_request_timeout(Duration::from_secs(5))
    // An idle kept-alive connection is closed after KEEP_ALIVE_IDLE_SECS. actix-web's own
    // 5 s raced clients that pool connections longer: a request sent on a connection the
    // server was closing failed unanswered (hyper's `IncompleteMessage`, seen in CI under
    // load). Load balancers want the backend's idle timeout above theirs (60 s on AWS ALB
    // and nginx's upstream keep-alive), so the race cannot happen behind them.
    .keep_alive(Duration::from_secs(crate::http::door::KEEP_ALIVE_IDLE_SECS))
    .shutdown_timeout(settings.shutdown_timeout_secs)
    // Signals are ours (`run_until_stopped`): streams must close before the drain waits.
    .disable_signals()
    .listen(listener)
    .map_err(|source| StartupError::Bind {
        bind: settings.bind.clone(),
        source,
    })?
    .run();
    Ok(server)
}

/// Digests of the researcher tokens; on the embedded store a missing token is generated into
/// `DATA_DIR/researcher-token` (mode 600). The token itself is never logged.
fn researcher_tokens(settings: &Settings, db: &Db) -> Result<HashSet<String>, StartupError> {
    let mut tokens: Vec<Secret> = settings.researcher_tokens.clone();
    if tokens.is_empty() {
        if db.is_postgres() {
            return Err(StartupError::MissingResearcherTokens);
        }
        let path = settings.data_dir.join("researcher-token");
        tokens.push(Secret(read_or_create_token_file(&path)?));
        tracing::info!(path = %path.display(), "researcher token file (RESEARCHER_TOKENS is unset)");
    }
    // A guessable researcher token opens every study's data: say so (issue 30). Not refused,
    // so existing deployments keep starting.
    let short = tokens.iter().filter(|t| t.0.chars().count() < 32).count();
    if short > 0 {
        tracing::warn!(
            short,
            "researcher tokens shorter than 32 characters are easier to guess; use random ones of 32 or more (unset RESEARCHER_TOKENS on SQLite to get one generated)"
        );
    }
    Ok(tokens.iter().map(|t| sha256_hex(t.0.as_bytes())).collect())
}

fn read_or_create_token_file(path: &Path) -> Result<String, StartupError> {
    let fail = |source| StartupError::TokenFile {
        path: path.display().to_string(),
        source,
    };
    if let Ok(existing) = std::fs::read_to_string(path) {
        let existing = existing.trim().to_string();
        if !existing.is_empty() {
            refuse_readable_by_others(path)?;
            return Ok(existing);
        }
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let token = crate::access::identities::new_token();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(fail)?;
    // The mode above applies only to a new file; an existing (empty) one is narrowed too.
    #[cfg(unix)]
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(fail)?;
    std::io::Write::write_all(&mut file, format!("{token}\n").as_bytes()).map_err(fail)?;
    Ok(token)
}

/// A URL as it may be logged: any `user:password@` before the host is left out.
fn without_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let host_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..host_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// A token file other users can read is a token other users have: refuse it and say how to fix.
fn refuse_readable_by_others(path: &Path) -> Result<(), StartupError> {
    let open = interview_projections::keys::open_to_others(path).map_err(|source| {
        StartupError::TokenFile {
            path: path.display().to_string(),
            source,
        }
    })?;
    match open {
        Some(mode) => Err(StartupError::TokenFileReadable {
            path: path.display().to_string(),
            mode,
        }),
        None => Ok(()),
    }
}

/// CORS for pages on other origins (a front end calling the AG-UI endpoint and the stream):
/// only the configured origins; none by default.
fn cors(origins: &[String]) -> actix_cors::Cors {
    let mut cors = actix_cors::Cors::default()
        .allowed_methods(["GET", "POST", "PUT", "OPTIONS"])
        .allowed_headers([
            actix_web::http::header::AUTHORIZATION,
            actix_web::http::header::CONTENT_TYPE,
            actix_web::http::header::ACCEPT,
            actix_web::http::header::HeaderName::from_static("last-event-id"),
            actix_web::http::header::HeaderName::from_static("x-request-id"),
        ])
        .expose_headers([actix_web::http::header::HeaderName::from_static(
            "x-request-id",
        )])
        .max_age(600);
    for origin in origins {
        cors = if origin == "*" {
            cors.allow_any_origin()
        } else {
            cors.allowed_origin(origin)
        };
    }
    cors
}

/// Periodic projection catch-up: a crash between a commit and its projection is repaired here.
fn spawn_catch_up(state: web::Data<AppState>, every_secs: u64) {
    if every_secs == 0 {
        return;
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(every_secs));
        tick.tick().await;
        loop {
            tick.tick().await;
            if let Err(error) = state.projector.catch_up().await {
                tracing::warn!(%error, "projection catch-up failed; will retry");
            }
        }
    });
}

fn log_urls(settings: &Settings, port: u16) {
    let base = settings.public_base_url.clone().unwrap_or_else(|| {
        let host = settings
            .bind
            .rsplit_once(':')
            .map_or("127.0.0.1", |(h, _)| h);
        format!("http://{host}:{port}")
    });
    tracing::info!(
        "listening: {base}  (demo interview: {base}/interview/{slug} ; API docs: {base}/api/openapi.json)",
        slug = crate::demo::DEMO_SLUG
    );
}

/// SIGTERM or SIGINT.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Rebuilds every session's views before serving when they were written in an older format
/// (`interview_projections::view_format`), logging the progress: a large log takes a while.
async fn reformat_views(projector: &Projector) -> Result<(), StartupError> {
    let started = std::time::Instant::now();
    let mut last_log = started;
    let (mut sessions, mut events) = (0usize, 0u64);
    let done = projector
        .bring_views_to_current_format(|s, e| {
            (sessions, events) = (sessions + s, events + e);
            if last_log.elapsed() >= Duration::from_secs(5) {
                last_log = std::time::Instant::now();
                tracing::info!(sessions, events, "rebuilding the views in their new format");
            }
        })
        .await
        .map_err(|e| {
            StartupError::Other(format!("rebuilding the views in their new format: {e}"))
        })?;
    if let Some(done) = done {
        tracing::info!(
            from_format = done.from,
            to_format = interview_projections::view_format::VIEW_FORMAT,
            sessions = done.sessions,
            events = done.events,
            seconds = started.elapsed().as_secs_f64(),
            "views rebuilt in their new format"
        );
    }
    Ok(())
}
