//! Studies: drafts, publishing into content-addressed configuration documents, pause/resume.
//!
//! Studies are configuration, not interview history, so they are plain rows rather than an
//! event stream; what a session ran under is pinned in its own `session.created` event.

use chrono::{DateTime, Utc};
use interview_projections::store::backend::ReadColumn;
use interview_projections::{on_db, Db};
use interview_session::notice::NoticeKind;
use interview_session::study::{is_valid_slug, PinnedStudy, StudyDefinition};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use super::error::CommandError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum StudyStatus {
    Draft,
    Published,
    Paused,
}

impl StudyStatus {
    fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A study as stored.
#[derive(Debug, Clone)]
pub struct StudyRecord {
    pub study_id: String,
    pub status: StudyStatus,
    pub definition: StudyDefinition,
    pub public_slug: Option<String>,
    pub published: Option<PinnedStudy>,
    pub published_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

fn study_not_found() -> CommandError {
    CommandError::NotFound {
        code: "study_not_found",
        message: "no such study".into(),
    }
}

/// Parses a row of `studies` (definition and published documents are JSON).
fn record_from_row<R: ReadColumn>(row: &R) -> Result<StudyRecord, CommandError> {
    let corrupt = |e: serde_json::Error| CommandError::Corrupt(Box::new(e));
    let status: String = row.read("status")?;
    let definition: Value = row.read("definition")?;
    let published: Option<Value> = row.read("published")?;
    Ok(StudyRecord {
        study_id: row.read("study_id")?,
        // A status this code does not know is a row it cannot serve (never a draft by default).
        status: status
            .parse()
            .map_err(|e| CommandError::Corrupt(Box::new(e)))?,
        definition: serde_json::from_value(definition).map_err(corrupt)?,
        public_slug: row.read("public_slug")?,
        published: published
            .map(serde_json::from_value)
            .transpose()
            .map_err(corrupt)?,
        published_at: row.read("published_at")?,
        created_at: row.read("created_at")?,
        updated_at: row.read("updated_at")?,
    })
}

const COLUMNS: &str =
    "study_id, status, definition, public_slug, published, published_at, created_at, updated_at";

pub async fn get(db: &Db, study_id: &str) -> Result<StudyRecord, CommandError> {
    let sql = format!("SELECT {COLUMNS} FROM studies WHERE study_id = $1");
    on_db!(read(db), |pool| {
        let row = sqlx::query(&sql)
            .bind(study_id)
            .fetch_optional(pool)
            .await?;
        row.as_ref()
            .map(record_from_row)
            .transpose()?
            .ok_or_else(study_not_found)
    })
}

pub async fn by_slug(db: &Db, slug: &str) -> Result<Option<StudyRecord>, CommandError> {
    let sql = format!("SELECT {COLUMNS} FROM studies WHERE public_slug = $1");
    on_db!(read(db), |pool| {
        let row = sqlx::query(&sql).bind(slug).fetch_optional(pool).await?;
        row.as_ref().map(record_from_row).transpose()
    })
}

pub async fn list(db: &Db) -> Result<Vec<StudyRecord>, CommandError> {
    let sql = format!("SELECT {COLUMNS} FROM studies ORDER BY created_at, study_id");
    on_db!(read(db), |pool| {
        let rows = sqlx::query(&sql).fetch_all(pool).await?;
        rows.iter().map(record_from_row).collect()
    })
}

/// Checks a definition's rules: 422 naming the field.
pub fn validate(definition: &StudyDefinition) -> Result<(), CommandError> {
    definition.validate().map_err(|e| CommandError::Invalid {
        code: "invalid_definition",
        field: e.field,
        message: e.message,
    })
}

pub async fn create(db: &Db, definition: StudyDefinition) -> Result<StudyRecord, CommandError> {
    validate(&definition)?;
    let study_id = Uuid::new_v4().to_string();
    let now = Utc::now();
    let json = serde_json::to_value(&definition).expect("definitions serialize");
    on_db!(write(db), |pool| {
        sqlx::query(include_str!("sql/insert_study.sql"))
            .bind(&study_id)
            .bind(json)
            .bind(now)
            .execute(pool)
            .await?;
    });
    get(db, &study_id).await
}

/// Replaces the draft definition; what is published stays until the next publish.
pub async fn replace(
    db: &Db,
    study_id: &str,
    definition: StudyDefinition,
) -> Result<StudyRecord, CommandError> {
    validate(&definition)?;
    let json = serde_json::to_value(&definition).expect("definitions serialize");
    let updated = on_db!(write(db), |pool| {
        sqlx::query(include_str!("sql/update_study_definition.sql"))
            .bind(study_id)
            .bind(json)
            .bind(Utc::now())
            .execute(pool)
            .await?
            .rows_affected()
    });
    if updated == 0 {
        return Err(study_not_found());
    }
    get(db, study_id).await
}

/// Publishes the current draft: stores its four documents (content-addressed, so unchanged
/// parts keep their ids), assigns the public slug on first publish, and makes it what new
/// sessions pin. A paused study stays paused.
// Long by design: the steps of one publish in order: read and validate the draft, choose the slug,
// list its four documents as a small table (id, kind, content), keep them in memory, pin the
// version, then one transaction writing the documents before the study row that names them, a taken
// slug answered as a conflict; split, the slug and the documents would be passed between the steps.
pub async fn publish(db: &Db, study_id: &str) -> Result<StudyRecord, CommandError> {
    let study = get(db, study_id).await?;
    validate(&study.definition)?;
    let slug = match (&study.definition.public_slug, &study.public_slug) {
        (Some(wanted), _) => wanted.clone(),
        (None, Some(existing)) => existing.clone(),
        (None, None) => generate_slug(&study.definition.title),
    };
    let docs = study.definition.versioned_documents();
    let v = &docs.config_versions;
    let documents = [
        (
            v.study_config_version_id.clone(),
            "study_config",
            serde_json::to_value(&docs.study_config),
        ),
        (
            v.agent_config_version_id.clone(),
            "agent_config",
            serde_json::to_value(&docs.agent_config),
        ),
        (
            v.output_schema_version_id.clone(),
            "output_schema",
            serde_json::to_value(&docs.output_schema),
        ),
        (
            v.model_config_version_id.clone(),
            "model_config",
            serde_json::to_value(&docs.model_config),
        ),
    ];
    // Sessions of this version name these documents: kept in memory, their first reads need no
    // query (they are content-addressed, so a copy never goes stale).
    let mut documents = documents;
    for (id, _, doc) in &mut documents {
        if let Ok(doc) = doc {
            // Stored as any store gives it back, so its content id checks out after a round trip.
            interview_session::hash::normalize_numbers(doc);
            interview_projections::log::keep_document(id, doc);
        }
    }
    let pinned = docs.pin(study_id, &slug);
    let pinned_json = serde_json::to_value(&pinned).expect("studies serialize");
    let status = match study.status {
        StudyStatus::Paused => StudyStatus::Paused,
        StudyStatus::Draft | StudyStatus::Published => StudyStatus::Published,
    };
    let now = Utc::now();
    let result: Result<(), sqlx::Error> = on_db!(write(db), |pool| {
        async {
            let mut tx = pool.begin().await?;
            for (id, kind, doc) in documents {
                sqlx::query(interview_projections::store::INSERT_DOCUMENT)
                    .bind(id)
                    .bind(kind)
                    .bind(doc.expect("documents serialize"))
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query(include_str!("sql/publish_study.sql"))
                .bind(study_id)
                .bind(status.as_str())
                .bind(&slug)
                .bind(pinned_json)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            tx.commit().await
        }
        .await
    });
    match result {
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            return Err(CommandError::Conflict {
                code: "slug_taken",
                message: format!("another study already uses the public slug {slug:?}"),
                details: Some(serde_json::json!({ "public_slug": slug })),
            })
        }
        other => other?,
    }
    get(db, study_id).await
}

/// Pauses (`paused = true`) or resumes a published study.
pub async fn set_paused(
    db: &Db,
    study_id: &str,
    paused: bool,
) -> Result<StudyRecord, CommandError> {
    let study = get(db, study_id).await?;
    if study.status == StudyStatus::Draft {
        return Err(CommandError::Conflict {
            code: "study_not_published",
            message: "publish the study first".into(),
            details: Some(serde_json::json!({ "status": "draft" })),
        });
    }
    let status = if paused {
        StudyStatus::Paused
    } else {
        StudyStatus::Published
    };
    if status == study.status {
        return Ok(study);
    }
    // The study announces the change (its webhooks) in the transaction that makes it.
    let now = Utc::now();
    let notice = interview_projections::notices::NewNotice {
        study_id: study_id.to_string(),
        kind: if paused {
            NoticeKind::StudyPaused
        } else {
            NoticeKind::StudyResumed
        },
        session_id: None,
        sequence: None,
        at: now,
    };
    on_db!(write(db), |pool| {
        let mut tx = pool.begin().await?;
        let changed = sqlx::query(include_str!("sql/set_study_status.sql"))
            .bind(study_id)
            .bind(status.as_str())
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        // Another request made the same change first: it announced it.
        if changed > 0 {
            interview_projections::notices::append(&mut tx, &[notice]).await?;
        }
        tx.commit().await?;
    });
    get(db, study_id).await
}

/// `title-words-1a2b3c`: readable, and random enough not to collide or be guessed.
fn generate_slug(title: &str) -> String {
    let mut base = String::new();
    for c in title.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            base.push(c);
        } else if !base.ends_with('-') && !base.is_empty() {
            base.push('-');
        }
        if base.len() >= 40 {
            break;
        }
    }
    let base = base.trim_matches('-');
    let base = if base.is_empty() { "study" } else { base };
    let mut suffix = [0u8; 3];
    getrandom::fill(&mut suffix).expect("the OS random source works");
    let slug = format!("{base}-{:02x}{:02x}{:02x}", suffix[0], suffix[1], suffix[2]);
    debug_assert!(is_valid_slug(&slug));
    slug
}

#[cfg(test)]
mod tests {
    #[test]
    fn generated_slugs_are_valid() {
        for title in ["Coffee habits 2026!", "用户访谈", "  --A--  "] {
            let slug = super::generate_slug(title);
            assert!(interview_session::study::is_valid_slug(&slug), "{slug}");
        }
    }
}
