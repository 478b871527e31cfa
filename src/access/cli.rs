//! `interview-runtime researchers …`: managing researchers from the command line, on the
//! database the server's settings name (`DATABASE_URL`, `DATA_DIR`). The same as the admin
//! routes (`/api/researchers`), for the first admin and for scripts.
//!
//! A token is printed once, alone on standard output (what a script captures); everything
//! else goes to standard error.

use chrono::Utc;
use interview_projections::db::PoolSettings;
use interview_projections::Db;

use super::identities::{self, NewResearcher};
use super::Role;
use crate::command::error::CommandError;

/// The server's commands other than serving.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Manage researchers: names, tokens and roles per study (docs/security.md).
    #[command(subcommand)]
    Researchers(Researchers),
}

#[derive(Debug, clap::Subcommand)]
pub enum Researchers {
    /// Adds a researcher and prints their token (shown once).
    Add {
        #[arg(long)]
        name: String,
        /// May do everything, create studies and manage researchers.
        #[arg(long)]
        admin: bool,
        /// A study to give a role on; each `--study` takes the `--role` in the same place.
        #[arg(long = "study")]
        studies: Vec<String>,
        #[arg(long = "role", value_enum)]
        roles: Vec<Role>,
        /// The token stops working this many days from now (fractions allowed).
        #[arg(long)]
        expires_in_days: Option<f64>,
    },
    /// Lists researchers, their roles and their tokens' dates (never a token).
    List,
    /// Revokes a researcher: every token of theirs stops working at once.
    Revoke { name: String },
    /// Gives a researcher a role on a study (replacing the one they had there).
    Grant {
        name: String,
        #[arg(long)]
        study: String,
        #[arg(long, value_enum)]
        role: Role,
    },
    /// Takes a researcher's role on a study away.
    Ungrant {
        name: String,
        #[arg(long)]
        study: String,
    },
    /// Makes a further token for a researcher and prints it (shown once).
    Token {
        name: String,
        #[arg(long)]
        expires_in_days: Option<f64>,
    },
}

/// A command's failure, said on standard error.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("cannot open the database: {0}")]
    Database(#[from] interview_projections::DbError),
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error("{0}")]
    Usage(String),
}

impl From<sqlx::Error> for CliError {
    fn from(e: sqlx::Error) -> Self {
        Self::Command(e.into())
    }
}

/// Runs `command` against the database at `database_url` (the server's settings name it).
pub async fn run(command: Command, database_url: &str) -> Result<(), CliError> {
    let pool = PoolSettings {
        max_connections: 2,
        ..PoolSettings::default()
    };
    let db = Db::connect(database_url, &pool).await?;
    let result = match command {
        Command::Researchers(c) => researchers(&db, c).await,
    };
    db.close().await;
    result
}

/// Records a change made here in the access log.
async fn record(db: &Db, what: &str, study_id: Option<&str>) -> Result<(), CliError> {
    let login = std::env::var("USER").unwrap_or_else(|_| "unknown".into());
    let entry = interview_projections::access_log::Entry {
        at: Utc::now(),
        researcher: format!("command line ({login})"),
        researcher_id: None,
        method: "CLI".into(),
        route: "researchers".into(),
        study_id: study_id.map(str::to_string),
        session_id: None,
        detail: Some(what.to_string()),
        status: 200,
        address: "local".into(),
        request_id: uuid::Uuid::new_v4().to_string(),
    };
    interview_projections::access_log::append(db, &entry).await?;
    Ok(())
}

// Long by design: one arm per subcommand, each the few calls it makes and what it prints.
async fn researchers(db: &Db, command: Researchers) -> Result<(), CliError> {
    match command {
        Researchers::Add {
            name,
            admin,
            studies,
            roles,
            expires_in_days,
        } => {
            if studies.len() != roles.len() {
                return Err(CliError::Usage(
                    "give each --study its --role (as many of one as of the other)".into(),
                ));
            }
            for study in &studies {
                crate::command::studies::get(db, study).await?;
            }
            let issued = identities::add(
                db,
                NewResearcher {
                    name,
                    admin,
                    roles: studies.into_iter().zip(roles).collect(),
                    expires_at: super::expiry_in_days(expires_in_days)?,
                },
            )
            .await?;
            record(db, &format!("add {}", issued.name), None).await?;
            eprintln!(
                "added {} ({}); their token, shown this once:",
                issued.name, issued.researcher_id
            );
            println!("{}", issued.token);
        }
        Researchers::List => {
            for r in identities::list(db).await? {
                let now = Utc::now();
                let live = r
                    .tokens
                    .iter()
                    .filter(|t| t.revoked_at.is_none() && t.expires_at.is_none_or(|at| at > now))
                    .count();
                let roles: Vec<String> = r
                    .roles
                    .iter()
                    .map(|g| format!("{}:{}", g.study_id, g.role))
                    .collect();
                println!(
                    "{}\t{}\t{}\t{} live token(s)\t{}",
                    r.name,
                    if r.admin { "admin" } else { "-" },
                    if roles.is_empty() {
                        "-".into()
                    } else {
                        roles.join(",")
                    },
                    live,
                    r.revoked_at
                        .map(|at| format!("revoked {}", at.to_rfc3339()))
                        .unwrap_or_default(),
                );
            }
        }
        Researchers::Revoke { name } => {
            identities::revoke(db, &name).await?;
            record(db, &format!("revoke {name}"), None).await?;
            eprintln!("revoked {name}: their tokens no longer work");
        }
        Researchers::Grant { name, study, role } => {
            crate::command::studies::get(db, &study).await?;
            identities::grant(db, &name, &study, role).await?;
            record(db, &format!("grant {name} {role}"), Some(&study)).await?;
            eprintln!("{name} is {role} of {study}");
        }
        Researchers::Ungrant { name, study } => {
            let had = identities::remove_role(db, &name, &study).await?;
            record(db, &format!("ungrant {name}"), Some(&study)).await?;
            eprintln!(
                "{}",
                if had {
                    format!("{name} has no role on {study} any more")
                } else {
                    format!("{name} had no role on {study}")
                }
            );
        }
        Researchers::Token {
            name,
            expires_in_days,
        } => {
            let issued =
                identities::issue_token(db, &name, super::expiry_in_days(expires_in_days)?).await?;
            record(db, &format!("token {name}"), None).await?;
            eprintln!("a new token for {name}, shown this once:");
            println!("{}", issued.token);
        }
    }
    Ok(())
}
