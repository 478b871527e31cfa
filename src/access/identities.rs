//! Researchers, their tokens and their roles, in the database (the statements are in `sql/`).
//! Only a token's SHA-256 is stored; the token itself is returned once, by the call that makes
//! it.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use interview_projections::{on_db, Db};
use interview_session::hash::sha256_hex;
use serde::Serialize;
use uuid::Uuid;

use super::{Identity, Role};
use crate::command::error::CommandError;

/// A researcher to add: their name, whether an admin, their first roles and when their first
/// token expires.
#[derive(Debug, Clone)]
pub struct NewResearcher {
    pub name: String,
    pub admin: bool,
    pub roles: Vec<(String, Role)>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// A token just made: shown to its researcher once, never again.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Issued {
    pub researcher_id: String,
    pub name: String,
    /// The bearer token. Only its SHA-256 is kept: it cannot be shown again.
    pub token: String,
    pub expires_at: Option<DateTime<Utc>>,
}

/// A researcher as an admin lists them (no token, ever).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ResearcherRecord {
    pub researcher_id: String,
    pub name: String,
    pub admin: bool,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub roles: Vec<StudyRole>,
    pub tokens: Vec<TokenRecord>,
}

/// A role on a study.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct StudyRole {
    pub study_id: String,
    pub role: Role,
}

/// One of a researcher's tokens, without the token.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TokenRecord {
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A study's researchers and their roles on it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RoleHolder {
    pub name: String,
    pub role: Role,
    pub granted_at: DateTime<Utc>,
}

/// A new researcher token: `rt_` and 32 random bytes in hex (also the generated
/// `DATA_DIR/researcher-token`).
pub fn new_token() -> String {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).expect("the OS random source works");
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    format!("rt_{hex}")
}

/// A name a researcher may have: 1 to 100 characters, no control characters, not starting with
/// `token:` (the names of configured tokens).
pub fn check_name(name: &str) -> Result<(), CommandError> {
    let n = name.chars().count();
    if n == 0 || n > 100 || name.chars().any(char::is_control) || name.starts_with("token:") {
        return Err(CommandError::Invalid {
            code: "invalid_name",
            field: "name".into(),
            message: "a name is 1 to 100 characters, without control characters, not starting with `token:`".into(),
        });
    }
    Ok(())
}

/// Who holds the token whose SHA-256 is `digest`, if it is live (not revoked, not expired, its
/// researcher not revoked), with their roles.
#[tracing::instrument(skip_all)]
pub async fn identity(
    db: &Db,
    digest: &str,
    now: DateTime<Utc>,
) -> Result<Option<Identity>, sqlx::Error> {
    on_db!(read(db), |pool| {
        let row: Option<(String, String, bool, Option<DateTime<Utc>>)> =
            sqlx::query_as(include_str!("sql/identity_by_token.sql"))
                .bind(digest)
                .fetch_optional(pool)
                .await?;
        let Some((researcher_id, name, admin, expires_at)) = row else {
            return Ok(None);
        };
        // Compared here, not in SQL: SQLite keeps times as text.
        if expires_at.is_some_and(|at| at <= now) {
            return Ok(None);
        }
        let rows: Vec<(String, String)> =
            sqlx::query_as(include_str!("sql/roles_of_researcher.sql"))
                .bind(&researcher_id)
                .fetch_all(pool)
                .await?;
        let roles = rows
            .into_iter()
            .filter_map(|(study, role)| role.parse().ok().map(|role| (study, role)))
            .collect();
        Ok(Some(Identity {
            researcher_id: Some(researcher_id),
            name,
            admin,
            roles,
        }))
    })
}

/// Whose token `digest` is, live or not (name, id): a refusal of a revoked or expired token is
/// theirs in the access log.
#[tracing::instrument(skip_all)]
pub async fn holder(db: &Db, digest: &str) -> Result<Option<(String, String)>, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("sql/holder_of_token.sql"))
            .bind(digest)
            .fetch_optional(pool)
            .await
    })
}

/// Adds a researcher with their roles and a first token, in one transaction: all of it, or
/// nothing (a taken name is 409 `researcher_exists`).
#[tracing::instrument(skip_all, fields(name = %new.name))]
pub async fn add(db: &Db, new: NewResearcher) -> Result<Issued, CommandError> {
    check_name(&new.name)?;
    let researcher_id = Uuid::new_v4().to_string();
    let token = new_token();
    let now = Utc::now();
    let result: Result<(), sqlx::Error> = on_db!(write(db), |pool| {
        async {
            let mut tx = pool.begin().await?;
            sqlx::query(include_str!("sql/insert_researcher.sql"))
                .bind(&researcher_id)
                .bind(&new.name)
                .bind(new.admin)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            sqlx::query(include_str!("sql/insert_token.sql"))
                .bind(sha256_hex(token.as_bytes()))
                .bind(&researcher_id)
                .bind(now)
                .bind(new.expires_at)
                .execute(&mut *tx)
                .await?;
            for (study_id, role) in &new.roles {
                sqlx::query(include_str!("sql/grant_role.sql"))
                    .bind(&new.name)
                    .bind(study_id)
                    .bind(role.as_ref())
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await
        }
        .await
    });
    match result {
        Ok(()) => Ok(Issued {
            researcher_id,
            name: new.name,
            token,
            expires_at: new.expires_at,
        }),
        Err(e) if is_unique_violation(&e) => Err(CommandError::Conflict {
            code: "researcher_exists",
            message: format!("a researcher named {:?} exists already", new.name),
            details: None,
        }),
        Err(e) => Err(e.into()),
    }
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

fn unknown(name: &str) -> CommandError {
    CommandError::NotFound {
        code: "researcher_not_found",
        message: format!("no researcher named {name:?} (or they were revoked)"),
    }
}

/// A further token for a researcher (their others keep working).
#[tracing::instrument(skip(db))]
pub async fn issue_token(
    db: &Db,
    name: &str,
    expires_at: Option<DateTime<Utc>>,
) -> Result<Issued, CommandError> {
    let token = new_token();
    let researcher_id: Option<String> = on_db!(write(db), |pool| {
        let id: Option<String> = sqlx::query_scalar(include_str!("sql/researcher_by_name.sql"))
            .bind(name)
            .fetch_optional(pool)
            .await?;
        if let Some(id) = &id {
            sqlx::query(include_str!("sql/insert_token.sql"))
                .bind(sha256_hex(token.as_bytes()))
                .bind(id)
                .bind(Utc::now())
                .bind(expires_at)
                .execute(pool)
                .await?;
        }
        Ok::<_, sqlx::Error>(id)
    })?;
    let researcher_id = researcher_id.ok_or_else(|| unknown(name))?;
    Ok(Issued {
        researcher_id,
        name: name.to_string(),
        token,
        expires_at,
    })
}

/// Revokes a researcher and every token they hold, at once.
#[tracing::instrument(skip(db))]
pub async fn revoke(db: &Db, name: &str) -> Result<(), CommandError> {
    let now = Utc::now();
    let revoked = on_db!(write(db), |pool| {
        async {
            let mut tx = pool.begin().await?;
            sqlx::query(include_str!("sql/revoke_tokens.sql"))
                .bind(name)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            let done = sqlx::query(include_str!("sql/revoke_researcher.sql"))
                .bind(name)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(done.rows_affected() > 0)
        }
        .await
    })?;
    if revoked {
        Ok(())
    } else {
        Err(unknown(name))
    }
}

/// Gives a researcher `role` on a study (replacing a role they had there).
#[tracing::instrument(skip(db))]
pub async fn grant(db: &Db, name: &str, study_id: &str, role: Role) -> Result<(), CommandError> {
    let done = on_db!(write(db), |pool| {
        sqlx::query(include_str!("sql/grant_role.sql"))
            .bind(name)
            .bind(study_id)
            .bind(role.as_ref())
            .bind(Utc::now())
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
    })?;
    if done == 0 {
        return Err(unknown(name));
    }
    Ok(())
}

/// Takes a researcher's role on a study away; whether they had one.
#[tracing::instrument(skip(db))]
pub async fn remove_role(db: &Db, name: &str, study_id: &str) -> Result<bool, CommandError> {
    let done = on_db!(write(db), |pool| {
        sqlx::query(include_str!("sql/remove_role.sql"))
            .bind(name)
            .bind(study_id)
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
    })?;
    Ok(done > 0)
}

/// Every researcher, with their roles and their tokens' dates (never a token).
#[tracing::instrument(skip(db))]
pub async fn list(db: &Db) -> Result<Vec<ResearcherRecord>, sqlx::Error> {
    type Row = (String, String, bool, DateTime<Utc>, Option<DateTime<Utc>>);
    type TokenRow = (
        String,
        DateTime<Utc>,
        Option<DateTime<Utc>>,
        Option<DateTime<Utc>>,
    );
    let (researchers, tokens, roles) = on_db!(read(db), |pool| {
        let researchers: Vec<Row> = sqlx::query_as(include_str!("sql/list_researchers.sql"))
            .fetch_all(pool)
            .await?;
        let tokens: Vec<TokenRow> = sqlx::query_as(include_str!("sql/list_tokens.sql"))
            .fetch_all(pool)
            .await?;
        let roles: Vec<(String, String, String)> =
            sqlx::query_as(include_str!("sql/list_roles.sql"))
                .fetch_all(pool)
                .await?;
        Ok::<_, sqlx::Error>((researchers, tokens, roles))
    })?;
    let mut tokens_of: HashMap<String, Vec<TokenRecord>> = HashMap::new();
    for (id, created_at, expires_at, revoked_at) in tokens {
        tokens_of.entry(id).or_default().push(TokenRecord {
            created_at,
            expires_at,
            revoked_at,
        });
    }
    let mut roles_of: HashMap<String, Vec<StudyRole>> = HashMap::new();
    for (researcher_id, study_id, role) in roles {
        if let Ok(role) = role.parse() {
            roles_of
                .entry(researcher_id)
                .or_default()
                .push(StudyRole { study_id, role });
        }
    }
    Ok(researchers
        .into_iter()
        .map(
            |(researcher_id, name, admin, created_at, revoked_at)| ResearcherRecord {
                tokens: tokens_of.remove(&researcher_id).unwrap_or_default(),
                roles: roles_of.remove(&researcher_id).unwrap_or_default(),
                researcher_id,
                name,
                admin,
                created_at,
                revoked_at,
            },
        )
        .collect())
}

/// A study's researchers and their roles on it (admins, who may do everything, are not listed;
/// nor are revoked researchers).
#[tracing::instrument(skip(db))]
pub async fn holders(db: &Db, study_id: &str) -> Result<Vec<RoleHolder>, sqlx::Error> {
    let rows: Vec<(String, String, DateTime<Utc>)> = on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("sql/roles_on_study.sql"))
            .bind(study_id)
            .fetch_all(pool)
            .await
    })?;
    Ok(rows
        .into_iter()
        .filter_map(|(name, role, granted_at)| {
            role.parse().ok().map(|role| RoleHolder {
                name,
                role,
                granted_at,
            })
        })
        .collect())
}
