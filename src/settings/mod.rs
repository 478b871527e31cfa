//! Configuration: one [`Settings`] struct, read from an optional TOML file and overridden by
//! environment variables and command-line flags (flags > environment > file > defaults).
//! Secrets are wrapped in [`Secret`] so they never reach a log line.

use std::fmt;
use std::path::PathBuf;

use clap::Parser;

pub use crate::access::sso::Oidc;
use serde::Deserialize;

mod exempt;

pub use exempt::Exempt;

/// A value that must never be printed.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_string()))
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Command line and environment. Every setting can also come from the `--config` file, under
/// the same name in snake_case.
#[derive(Debug, Default, Parser, Deserialize)]
#[command(
    name = "interview-runtime",
    version,
    about = "Event-sourced AI interview runtime (HTTP + SSE)"
)]
#[serde(default, deny_unknown_fields)]
pub struct Overrides {
    /// TOML file with settings; environment variables and flags override it.
    #[arg(long, env = "CONFIG_FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// What to do instead of serving (`researchers …`); none serves.
    #[command(subcommand)]
    #[serde(skip)]
    pub command: Option<crate::access::cli::Command>,
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "BIND")]
    pub bind: Option<String>,
    /// postgres://… for PostgreSQL, sqlite://PATH for the embedded store
    /// [default: sqlite://<DATA_DIR>/interview.db].
    /// (Its value from the environment is not shown here: it may hold a password.)
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Directory for the embedded database and the generated researcher token [default: ./data].
    #[arg(long, env = "DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Comma-separated researcher bearer tokens. Unset on the embedded store: one is generated
    /// into DATA_DIR/researcher-token. Required with PostgreSQL.
    #[arg(long, env = "RESEARCHER_TOKENS", hide_env_values = true)]
    pub researcher_tokens: Option<Secret>,
    /// The key-encryption key (32 bytes as 64 hex digits or base64) that wraps every session's
    /// data key (docs/privacy.md). Unset: DATA_KEY_FILE; failing that, the embedded store
    /// generates DATA_DIR/data.key, and PostgreSQL keeps a generated one in the database.
    #[arg(long, env = "DATA_KEY", hide_env_values = true)]
    pub data_key: Option<Secret>,
    /// A file holding DATA_KEY (mode 600).
    #[arg(long, env = "DATA_KEY_FILE")]
    pub data_key_file: Option<PathBuf>,
    /// Comma-separated earlier key-encryption keys: session keys still wrapped by one are moved
    /// under DATA_KEY at start-up.
    #[arg(long, env = "DATA_KEYS_RETIRED", hide_env_values = true)]
    pub data_keys_retired: Option<Secret>,
    /// A bearer token that may read /metrics (and nothing else), for a Prometheus scraper;
    /// admins' tokens may too.
    #[arg(long, env = "METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<Secret>,
    /// Base URL of an OpenAI-compatible API (used by studies in llm mode).
    #[arg(long, env = "OPENAI_BASE_URL", hide_env_values = true)]
    pub openai_base_url: Option<String>,
    /// API key for OPENAI_BASE_URL.
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub openai_api_key: Option<Secret>,
    /// Publish the bundled demo study (slug `demo`) at start-up when none exists [default: true].
    #[arg(long, env = "DEMO_STUDY")]
    pub demo_study: Option<bool>,
    /// Largest participant message, in bytes [default: 8192].
    #[arg(long, env = "MAX_MESSAGE_BYTES")]
    pub max_message_bytes: Option<usize>,
    /// Largest request body, in bytes [default: 1048576].
    #[arg(long, env = "MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Database pool size [default: 16].
    #[arg(long, env = "DB_MAX_CONNECTIONS")]
    pub db_max_connections: Option<u32>,
    /// Seconds between projection catch-up sweeps [default: 30].
    #[arg(long, env = "CATCH_UP_INTERVAL_SECS")]
    pub catch_up_interval_secs: Option<u64>,
    /// Seconds to let in-flight requests finish on SIGTERM [default: 30].
    #[arg(long, env = "SHUTDOWN_TIMEOUT_SECS")]
    pub shutdown_timeout_secs: Option<u64>,
    /// Seconds between keep-alive comments on idle SSE streams [default: 15].
    #[arg(long, env = "SSE_KEEPALIVE_SECS")]
    pub sse_keepalive_secs: Option<u64>,
    /// Seconds between idle-session sweeps, which also erase sessions past their study's
    /// retention (and recovery sweeps for post-session extractions, which otherwise follow each
    /// completion at once); 0 turns all of them off [default: 60].
    #[arg(long, env = "SWEEP_INTERVAL_SECS")]
    pub sweep_interval_secs: Option<u64>,
    /// Seconds a model stream may stay silent before it counts as stalled [default: 15].
    #[arg(long, env = "MODEL_IDLE_TIMEOUT_SECS")]
    pub model_idle_timeout_secs: Option<u64>,
    /// Model requests sent at once; a participant's step goes before a background extraction.
    /// Set 1 for a server that serves one request at a time (llama-cpp-python); 0 = no limit.
    /// Unset: no limit until the endpoint cuts a request short while another runs, then 1.
    #[arg(long, env = "MODEL_MAX_CONCURRENT_REQUESTS")]
    pub model_max_concurrent_requests: Option<usize>,
    /// Model tokens (prompt and completion) this process may spend per UTC day, over all
    /// sessions; past it the rules interviewer decides. 0 = no cap [default: 5000000].
    #[arg(long, env = "MODEL_TOKENS_PER_DAY")]
    pub model_tokens_per_day: Option<u64>,
    /// Model tokens this process may spend per UTC day on one study. 0 = no cap
    /// [default: 2000000].
    #[arg(long, env = "MODEL_TOKENS_PER_STUDY_PER_DAY")]
    pub model_tokens_per_study_per_day: Option<u64>,
    /// Model tokens one session may spend when its study sets no `model.max_tokens_per_session`.
    /// 0 = no cap [default: 150000].
    #[arg(long, env = "MODEL_TOKENS_PER_SESSION")]
    pub model_tokens_per_session: Option<u64>,
    /// Model tokens this process may spend per hour on the inputs of one client address.
    /// 0 = no cap [default: 300000].
    #[arg(long, env = "MODEL_TOKENS_PER_ADDRESS_PER_HOUR")]
    pub model_tokens_per_address_per_hour: Option<u64>,
    /// Messages, widget answers and ends one session may send per minute (then 429).
    /// 0 = no limit [default: 30].
    #[arg(long, env = "INPUTS_PER_SESSION_PER_MINUTE")]
    pub inputs_per_session_per_minute: Option<u32>,
    /// Log format [default: text].
    #[arg(long, env = "LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// OTLP/HTTP collector to send traces to (`http://collector:4318`); only in a server built
    /// with `--features otlp` [default: none, no traces sent].
    /// (Its value from the environment is not shown here.)
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", hide_env_values = true)]
    pub otlp_endpoint: Option<String>,
    /// Base URL printed in the start-up log [default: http://BIND].
    #[arg(long, env = "PUBLIC_BASE_URL")]
    pub public_base_url: Option<String>,
    /// Origins (comma-separated) whose pages may call the API from the browser — the AG-UI
    /// endpoint, the event stream and the participant routes; `*` for any [default: none].
    #[arg(long, env = "CORS_ALLOWED_ORIGINS")]
    pub cors_allowed_origins: Option<String>,
    /// New sessions per minute from one client address; 0 = no limit [default: 300].
    #[arg(long, env = "CREATE_RATE_PER_ADDRESS")]
    pub create_rate_per_address: Option<u32>,
    /// New sessions per minute for one study; 0 = no limit [default: 6000].
    #[arg(long, env = "CREATE_RATE_PER_STUDY")]
    pub create_rate_per_study: Option<u32>,
    /// Open event streams (SSE and AG-UI runs) per process; 0 = no cap [default: 20000].
    #[arg(long, env = "MAX_STREAMS")]
    pub max_streams: Option<usize>,
    /// Open event streams of one session (a reload or a second tab opens another); 0 = no cap
    /// [default: 8].
    #[arg(long, env = "MAX_STREAMS_PER_SESSION")]
    pub max_streams_per_session: Option<usize>,
    /// Requests in flight per process, counted once their body is in; 0 = no cap
    /// [default: 4096].
    #[arg(long, env = "MAX_INFLIGHT_REQUESTS")]
    pub max_inflight_requests: Option<usize>,
    /// Seconds a client has to send a request body once its headers are in (408 after)
    /// [default: 5].
    #[arg(long, env = "BODY_READ_TIMEOUT_SECS")]
    pub body_read_timeout_secs: Option<u64>,
    /// Open connections from one client address; more are closed at once; 0 = no cap
    /// [default: 256].
    #[arg(long, env = "MAX_CONNECTIONS_PER_ADDRESS")]
    pub max_connections_per_address: Option<usize>,
    /// Client addresses the per-address connection cap leaves alone: `loopback` (a reverse
    /// proxy on this host), or comma-separated IP addresses; empty for none [default: loopback].
    #[arg(long, env = "CONNECTION_CAP_EXEMPT", value_parser = Exempt::parse)]
    pub connection_cap_exempt: Option<Exempt>,
    /// Bytes of request bodies being read at once, across all connections; beyond it 503
    /// `overloaded`; 0 = no budget [default: 67108864].
    #[arg(long, env = "MAX_PENDING_BODY_BYTES")]
    pub max_pending_body_bytes: Option<usize>,
    /// Largest study definition, in bytes (413 above) [default: 262144].
    #[arg(long, env = "MAX_STUDY_BYTES")]
    pub max_study_bytes: Option<usize>,
    /// Single sign-on: the OpenID Connect provider's issuer (`iss`); with OIDC_AUDIENCE and
    /// OIDC_JWKS_URL, researchers may present the provider's JWTs (docs/security.md).
    #[arg(long, env = "OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,
    /// The audience (`aud`) a JWT must name: this server's client id at the provider.
    #[arg(long, env = "OIDC_AUDIENCE")]
    pub oidc_audience: Option<String>,
    /// Where the provider publishes its signing keys (JWKS).
    #[arg(long, env = "OIDC_JWKS_URL")]
    pub oidc_jwks_url: Option<String>,
    /// The claim holding the researcher's name [default: preferred_username, then sub].
    #[arg(long, env = "OIDC_NAME_CLAIM")]
    pub oidc_name_claim: Option<String>,
    /// The claim holding their roles: a list of `admin` and `<study_id>:<role>` [default:
    /// interview_roles].
    #[arg(long, env = "OIDC_ROLES_CLAIM")]
    pub oidc_roles_claim: Option<String>,
    /// Webhooks may be delivered to loopback, private and link-local addresses, and over plain
    /// http (a receiver on this machine or inside the network; docs/webhooks.md)
    /// [default: false].
    #[arg(long, env = "WEBHOOK_ALLOW_PRIVATE_ADDRESSES")]
    pub webhook_allow_private_addresses: Option<bool>,
    /// Seconds a webhook receiver has to answer one delivery, 1–600 [default: 10].
    #[arg(long, env = "WEBHOOK_TIMEOUT_SECS")]
    pub webhook_timeout_secs: Option<u64>,
    /// Milliseconds before the first retry of a failed delivery; each retry waits twice as long
    /// as the one before (with jitter), at most an hour [default: 1000].
    #[arg(long, env = "WEBHOOK_RETRY_BASE_MS")]
    pub webhook_retry_base_ms: Option<u64>,
    /// Seconds a failing delivery is retried before its subscription is marked failing
    /// [default: 86400].
    #[arg(long, env = "WEBHOOK_RETRY_FOR_SECS")]
    pub webhook_retry_for_secs: Option<u64>,
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    pub bind: String,
    pub database_url: Option<String>,
    pub data_dir: PathBuf,
    pub researcher_tokens: Vec<Secret>,
    pub data_key: Option<Secret>,
    pub data_key_file: Option<PathBuf>,
    pub data_keys_retired: Vec<Secret>,
    pub metrics_token: Option<Secret>,
    pub openai_base_url: Option<String>,
    pub openai_api_key: Option<Secret>,
    pub demo_study: bool,
    pub max_message_bytes: usize,
    pub max_body_bytes: usize,
    pub db_max_connections: u32,
    pub catch_up_interval_secs: u64,
    pub shutdown_timeout_secs: u64,
    pub sse_keepalive_secs: u64,
    pub model_idle_timeout_secs: u64,
    /// `None`: learned (see the flag).
    pub model_max_concurrent_requests: Option<usize>,
    pub model_tokens_per_day: u64,
    pub model_tokens_per_study_per_day: u64,
    pub model_tokens_per_session: u64,
    pub model_tokens_per_address_per_hour: u64,
    pub inputs_per_session_per_minute: u32,
    pub sweep_interval_secs: u64,
    pub log_format: LogFormat,
    pub otlp_endpoint: Option<String>,
    pub public_base_url: Option<String>,
    pub cors_allowed_origins: Vec<String>,
    pub create_rate_per_address: u32,
    pub create_rate_per_study: u32,
    pub max_streams: usize,
    pub max_inflight_requests: usize,
    pub max_streams_per_session: usize,
    pub body_read_timeout_secs: u64,
    pub max_connections_per_address: usize,
    pub connection_cap_exempt: Exempt,
    pub max_study_bytes: usize,
    pub max_pending_body_bytes: usize,
    /// Single sign-on, when configured (all of issuer, audience and JWKS URL).
    pub oidc: Option<Oidc>,
    /// Where and how webhooks are delivered.
    pub webhooks: crate::webhooks::Policy,
}

/// Where signing keys may come from: https, or plain http on this machine only (whoever can
/// change the keys in transit could sign in as anyone).
fn trusted_url(url: &str) -> bool {
    if url.starts_with("https://") {
        return true;
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = host.rsplit_once(':').map_or(host, |(h, port)| {
        if port.chars().all(|c| c.is_ascii_digit()) {
            h
        } else {
            host
        }
    });
    matches!(host, "127.0.0.1" | "[::1]" | "localhost")
}

/// Single sign-on from the command line and environment over the file, setting by setting: all
/// of issuer, audience and JWKS URL, or none.
fn oidc(cli: &Overrides, file: &Overrides) -> Result<Option<Oidc>, SettingsError> {
    let pick = |field: fn(&Overrides) -> &Option<String>| {
        field(cli)
            .clone()
            .or_else(|| field(file).clone())
            .filter(|v| !v.trim().is_empty())
    };
    let found = (
        pick(|o| &o.oidc_issuer),
        pick(|o| &o.oidc_audience),
        pick(|o| &o.oidc_jwks_url),
    );
    match found {
        (None, None, None) => Ok(None),
        (Some(_), Some(_), Some(jwks_url)) if !trusted_url(&jwks_url) => {
            Err(SettingsError::InsecureJwksUrl)
        }
        (Some(issuer), Some(audience), Some(jwks_url)) => Ok(Some(Oidc {
            issuer,
            audience,
            jwks_url,
            name_claim: pick(|o| &o.oidc_name_claim),
            roles_claim: pick(|o| &o.oidc_roles_claim).unwrap_or_else(|| "interview_roles".into()),
        })),
        _ => Err(SettingsError::IncompleteOidc),
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:8080".into(),
            database_url: None,
            data_dir: PathBuf::from("./data"),
            researcher_tokens: Vec::new(),
            data_key: None,
            data_key_file: None,
            data_keys_retired: Vec::new(),
            metrics_token: None,
            openai_base_url: None,
            openai_api_key: None,
            demo_study: true,
            max_message_bytes: 8 * 1024,
            max_body_bytes: 1024 * 1024,
            db_max_connections: 16,
            catch_up_interval_secs: 30,
            shutdown_timeout_secs: 30,
            sse_keepalive_secs: 15,
            model_idle_timeout_secs: 15,
            model_max_concurrent_requests: None,
            // Spend is bounded unless an operator says otherwise (issue 30): docs/security.md
            // gives the worst case these allow.
            model_tokens_per_day: 5_000_000,
            model_tokens_per_study_per_day: 2_000_000,
            model_tokens_per_session: 150_000,
            model_tokens_per_address_per_hour: 300_000,
            inputs_per_session_per_minute: 30,
            sweep_interval_secs: 60,
            log_format: LogFormat::Text,
            otlp_endpoint: None,
            public_base_url: None,
            cors_allowed_origins: Vec::new(),
            create_rate_per_address: 300,
            create_rate_per_study: 6000,
            max_streams: 20_000,
            max_inflight_requests: 4096,
            max_streams_per_session: 8,
            body_read_timeout_secs: 5,
            max_connections_per_address: 256,
            connection_cap_exempt: Exempt::Loopback,
            max_study_bytes: 256 * 1024,
            max_pending_body_bytes: 64 * 1024 * 1024,
            oidc: None,
            webhooks: crate::webhooks::Policy::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("cannot read the config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the config file {path} is not valid: {source}")]
    Parse {
        path: String,
        source: toml::de::Error,
    },
    #[error("single sign-on needs OIDC_ISSUER, OIDC_AUDIENCE and OIDC_JWKS_URL together")]
    IncompleteOidc,
    #[error("OIDC_JWKS_URL must be https (http only on this machine: 127.0.0.1, ::1, localhost)")]
    InsecureJwksUrl,
}

impl Settings {
    /// The most a body carrying one participant message may be: the text, escaped at worst six
    /// bytes a character in JSON, and the rest of the request (AG-UI's run input around it).
    pub fn message_body_bytes(&self) -> usize {
        self.max_message_bytes * 6 + 4096
    }

    /// Flags and environment, over the `--config` file, over the defaults.
    pub fn load(cli: Overrides) -> Result<Self, SettingsError> {
        let file = match &cli.config {
            Some(path) => {
                let shown = path.display().to_string();
                let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
                    path: shown.clone(),
                    source,
                })?;
                toml::from_str::<Overrides>(&text).map_err(|source| SettingsError::Parse {
                    path: shown,
                    source,
                })?
            }
            None => Overrides::default(),
        };
        let oidc = oidc(&cli, &file)?;
        let mut settings = Self::default().with(file).with(cli);
        settings.oidc = oidc;
        Ok(settings)
    }

    // Long by design: one line per setting a file or the environment may give.
    fn with(mut self, o: Overrides) -> Self {
        macro_rules! take {
            ($($field:ident),*) => { $( if let Some(v) = o.$field { self.$field = v; } )* };
        }
        take!(
            bind,
            data_dir,
            demo_study,
            max_message_bytes,
            max_body_bytes,
            db_max_connections,
            catch_up_interval_secs,
            shutdown_timeout_secs,
            sse_keepalive_secs,
            model_idle_timeout_secs,
            model_tokens_per_day,
            model_tokens_per_study_per_day,
            model_tokens_per_session,
            model_tokens_per_address_per_hour,
            inputs_per_session_per_minute,
            sweep_interval_secs,
            log_format,
            create_rate_per_address,
            create_rate_per_study,
            max_streams,
            max_inflight_requests,
            max_streams_per_session,
            body_read_timeout_secs,
            max_connections_per_address,
            connection_cap_exempt,
            max_study_bytes,
            max_pending_body_bytes
        );
        if o.database_url.is_some() {
            self.database_url = o.database_url;
        }
        if o.openai_base_url.is_some() {
            self.openai_base_url = o.openai_base_url;
        }
        if o.model_max_concurrent_requests.is_some() {
            self.model_max_concurrent_requests = o.model_max_concurrent_requests;
        }
        if o.openai_api_key.is_some() {
            self.openai_api_key = o.openai_api_key;
        }
        if o.public_base_url.is_some() {
            self.public_base_url = o.public_base_url;
        }
        if let Some(endpoint) = o.otlp_endpoint.filter(|e| !e.trim().is_empty()) {
            self.otlp_endpoint = Some(endpoint);
        }
        if let Some(token) = o.metrics_token.filter(|t| !t.0.is_empty()) {
            self.metrics_token = Some(token);
        }
        if let Some(origins) = o.cors_allowed_origins {
            self.cors_allowed_origins = origins
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(String::from)
                .collect();
        }
        if let Some(key) = o.data_key.filter(|k| !k.0.trim().is_empty()) {
            self.data_key = Some(key);
        }
        if o.data_key_file.is_some() {
            self.data_key_file = o.data_key_file;
        }
        if let Some(keys) = o.data_keys_retired {
            self.data_keys_retired = split_secrets(&keys);
        }
        if let Some(tokens) = o.researcher_tokens {
            self.researcher_tokens = split_secrets(&tokens);
        }
        let hooks = &mut self.webhooks;
        if let Some(allow) = o.webhook_allow_private_addresses {
            hooks.allow_private_addresses = allow;
        }
        if let Some(secs) = o.webhook_timeout_secs {
            hooks.timeout = std::time::Duration::from_secs(secs.clamp(1, 600));
        }
        if let Some(ms) = o.webhook_retry_base_ms {
            hooks.retry_base = std::time::Duration::from_millis(ms.max(1));
        }
        if let Some(secs) = o.webhook_retry_for_secs {
            hooks.retry_for = std::time::Duration::from_secs(secs);
        }
        self
    }

    /// Where the key-encryption keys come from (`interview_projections::keys`). The embedded
    /// store's generated key lives beside its database file (`DATA_DIR/data.key` by default),
    /// so every process and `replay` opening that file finds the same key.
    pub fn key_source(&self) -> interview_projections::keys::KeySource {
        let url = self.effective_database_url();
        let embedded = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .map(|path| std::path::Path::new(path).with_file_name("data.key"));
        interview_projections::keys::KeySource {
            configured: self.data_key.as_ref().map(|k| k.0.clone()),
            file: self.data_key_file.clone(),
            default_file: embedded,
            retired: self.data_keys_retired.iter().map(|k| k.0.clone()).collect(),
        }
    }

    /// The database URL in effect: the configured one, or the embedded file under `data_dir`.
    pub fn effective_database_url(&self) -> String {
        self.database_url
            .clone()
            .unwrap_or_else(|| format!("sqlite://{}", self.data_dir.join("interview.db").display()))
    }
}

/// A comma-separated list of secrets, blanks left out.
fn split_secrets(list: &Secret) -> Vec<Secret> {
    list.0
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| Secret(t.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {

    #[test]
    fn signing_keys_come_over_https_or_from_this_machine() {
        for ok in [
            "https://idp.example.org/jwks",
            "http://127.0.0.1:8123/jwks.json",
            "http://localhost/keys",
            "http://[::1]:9000/k",
        ] {
            assert!(trusted_url(ok), "{ok}");
        }
        for bad in [
            "http://idp.example.org/jwks",
            "http://127.0.0.1.evil.test/jwks",
            "http://localhost.evil.test:80/",
            "ftp://x",
        ] {
            assert!(!trusted_url(bad), "{bad}");
        }
    }

    use super::*;

    #[test]
    fn flags_override_the_file_and_the_file_overrides_defaults() {
        let file: Overrides =
            toml::from_str("bind = \"0.0.0.0:9000\"\nmax_message_bytes = 100\n").unwrap();
        let cli = Overrides {
            max_message_bytes: Some(200),
            researcher_tokens: Some(Secret("a, b".into())),
            ..Overrides::default()
        };
        let s = Settings::default().with(file).with(cli);
        assert_eq!(s.bind, "0.0.0.0:9000");
        assert_eq!(s.max_message_bytes, 200);
        assert_eq!(
            s.researcher_tokens,
            vec![Secret("a".into()), Secret("b".into())]
        );
        assert!(!format!("{s:?}").contains("\"a\""));
    }
}
