//! The stored columns of every read model, as one list per table: what the writers bind and
//! what `replay verify` compares, column by column, with the rows it rebuilds from the log. A
//! column added here is written and audited at once; there is no second list to forget.
//!
//! Comparison rules (also in `docs/audit.md`): times are compared to the microsecond (what both
//! stores keep; logs written before events were stamped in microseconds carry nanoseconds);
//! JSON columns are compared as JSON values (PostgreSQL's `jsonb` reorders keys); everything
//! else exactly.

use serde_json::Value;

use crate::read_side::views::{SessionStateView, TranscriptRow};
use interview_session::SessionStatus;

pub use crate::store::backend::{Cell, Kind};

/// `session_state`, keyed by `session_id` (the first column).
pub const STATE_COLUMNS: [&str; 15] = [
    "session_id",
    "study_id",
    "status",
    "current_phase",
    "turn_count",
    "preview",
    "participant_token_sha256",
    "last_seq",
    "created_at",
    "updated_at",
    "state",
    "idle_deadline",
    "needs_final_extraction",
    "participant_ref",
    "retained_since",
];

pub const STATE_KINDS: [Kind; 15] = {
    use Kind::*;
    [
        Text, Text, Text, Text, Int, Bool, Text, Int, Time, Time, Json, Time, Bool, Text, Time,
    ]
};

pub fn state_cells(view: &SessionStateView) -> [Cell; 15] {
    let state = serde_json::to_value(view).expect("views serialize");
    let phase = state["current_phase"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    [
        Cell::Text(Some(view.session_id.clone())),
        Cell::Text(Some(view.study_id.clone())),
        Cell::Text(Some(view.status.as_str().to_string())),
        Cell::Text(Some(phase)),
        Cell::Int(Some(i64::from(view.turns.count()))),
        Cell::Bool(Some(view.preview)),
        Cell::Text(Some(view.participant_token_sha256.clone())),
        Cell::Int(Some(view.last_seq as i64)),
        Cell::Time(view.created_at),
        Cell::Time(view.last_activity_at),
        Cell::Json(Some(state)),
        Cell::Time(view.idle_deadline()),
        Cell::Bool(Some(
            view.status == SessionStatus::Completed
                && !view.final_extraction_done
                && view.erasure.is_none(),
        )),
        Cell::Text(view.participant_ref.clone()),
        Cell::Time(view.retained_since()),
    ]
}

/// `transcript`, keyed by `(session_id, seq)`.
pub const TRANSCRIPT_COLUMNS: [&str; 8] = [
    "session_id",
    "seq",
    "turn_id",
    "role",
    "kind",
    "content",
    "interaction_id",
    "created_at",
];

pub const TRANSCRIPT_KINDS: [Kind; 8] = {
    use Kind::*;
    [Text, Int, Text, Text, Text, Text, Text, Time]
};

pub fn transcript_cells(session_id: &str, t: &TranscriptRow) -> [Cell; 8] {
    [
        Cell::Text(Some(session_id.to_string())),
        Cell::Int(Some(t.seq as i64)),
        Cell::Text(Some(t.turn_id.clone())),
        Cell::Text(Some(t.role.clone())),
        Cell::Text(Some(t.kind.clone())),
        Cell::Text(Some(t.content.clone())),
        Cell::Text(t.interaction_id.clone()),
        Cell::Time(Some(t.created_at)),
    ]
}

/// `session_fields`, keyed by `(session_id, field_id)`: each field extracted so far.
pub const FIELD_COLUMNS: [&str; 3] = ["session_id", "field_id", "value"];

pub const FIELD_KINDS: [Kind; 3] = [Kind::Text, Kind::Text, Kind::Json];

pub fn field_cells(session_id: &str, field_id: &str, value: &Value) -> [Cell; 3] {
    [
        Cell::Text(Some(session_id.to_string())),
        Cell::Text(Some(field_id.to_string())),
        Cell::Json(Some(value.clone())),
    ]
}

/// `results`, keyed by `session_id`: a row for a completed session that is not a preview.
pub const RESULT_COLUMNS: [&str; 9] = [
    "session_id",
    "study_id",
    "participant_ref",
    "completed_at",
    "end_reason",
    "summary",
    "summary_confirmed",
    "fields",
    "last_seq",
];

pub const RESULT_KINDS: [Kind; 9] = {
    use Kind::*;
    [Text, Text, Text, Time, Text, Text, Bool, Json, Int]
};

/// The view's `results` row, if it has one.
pub fn result_cells(view: &SessionStateView) -> Option<[Cell; 9]> {
    if view.status != SessionStatus::Completed || view.preview || view.erasure.is_some() {
        return None;
    }
    Some([
        Cell::Text(Some(view.session_id.clone())),
        Cell::Text(Some(view.study_id.clone())),
        Cell::Text(view.participant_ref.clone()),
        Cell::Time(Some(view.ended_at.unwrap_or_default())),
        Cell::Text(end_reason_text(view)),
        Cell::Text(view.summary.clone()),
        Cell::Bool(view.summary_confirmed),
        Cell::Json(Some(Value::Object(view.extracted_fields.clone()))),
        Cell::Int(Some(view.last_seq as i64)),
    ])
}

/// `session_overview`, keyed by `session_id`: what the session adds to its study's overview.
pub const OVERVIEW_COLUMNS: [&str; 3] = ["session_id", "study_id", "contribution"];

pub const OVERVIEW_KINDS: [Kind; 3] = [Kind::Text, Kind::Text, Kind::Json];

/// Binds `cells` in order onto a statement (the writers' side of the one list).
pub(crate) fn bind_all<'q, DB: crate::store::backend::Backend>(
    q: crate::store::backend::Query<'q, DB>,
    cells: impl IntoIterator<Item = Cell>,
) -> crate::store::backend::Query<'q, DB> {
    cells.into_iter().fold(q, DB::bind_cell)
}

/// A stored row as read back: each column's value, or why it could not be read (a value of the
/// wrong type — itself a sign of tampering).
pub type StoredRow = Vec<Result<Cell, String>>;

/// The stored rows of `table` for one session, `columns` read as `kinds`, ordered by `order_by`.
pub async fn stored_rows(
    db: &crate::store::db::Db,
    table: &str,
    columns: &[&str],
    kinds: &[Kind],
    session_id: &str,
    order_by: &str,
) -> Result<Vec<StoredRow>, sqlx::Error> {
    let sql = format!(
        "SELECT {} FROM {table} WHERE session_id = $1 ORDER BY {order_by}",
        columns.join(", ")
    );
    crate::on_db!(read(db), |pool| {
        use crate::store::backend::ReadColumn;
        let rows = sqlx::query(&sql).bind(session_id).fetch_all(pool).await?;
        Ok(rows
            .iter()
            .map(|row| {
                kinds
                    .iter()
                    .enumerate()
                    .map(|(i, kind)| row.read_cell(i, *kind).map_err(|e| e.to_string()))
                    .collect()
            })
            .collect())
    })
}

/// The `results.end_reason` column of a view: the reason's name, as the events spell it
/// (`strum`'s name, checked against serde's in `interview_session`'s name tests).
fn end_reason_text(view: &SessionStateView) -> Option<String> {
    view.end_reason.map(|r| r.as_ref().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_list_names_a_kind_for_each_cell() {
        let view = SessionStateView {
            status: SessionStatus::Completed,
            ..Default::default()
        };
        let kinds = |cells: &[Cell]| cells.iter().map(Cell::kind).collect::<Vec<_>>();
        assert_eq!(kinds(&state_cells(&view)), STATE_KINDS);
        assert_eq!(kinds(&result_cells(&view).unwrap()), RESULT_KINDS);
        let t = TranscriptRow {
            seq: 1,
            turn_id: "t".into(),
            role: "user".into(),
            kind: "message".into(),
            content: "c".into(),
            interaction_id: None,
            created_at: chrono::Utc::now(),
        };
        assert_eq!(kinds(&transcript_cells("s", &t)), TRANSCRIPT_KINDS);
    }

    #[test]
    fn the_idle_deadline_is_the_exact_one_rounded_up_to_the_minute() {
        let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc();
        let view = |last: &str, status| SessionStateView {
            status,
            idle_ttl_minutes: 30,
            last_activity_at: Some(at(last)),
            ..Default::default()
        };
        let open = SessionStatus::WaitingForUser;
        let deadline = |last| view(last, open).idle_deadline();
        assert_eq!(
            deadline("2026-12-01T10:00:00.000001Z"),
            Some(at("2026-12-01T10:31:00Z"))
        );
        assert_eq!(
            deadline("2026-12-01T10:00:59.9Z"),
            Some(at("2026-12-01T10:31:00Z"))
        );
        assert_eq!(
            deadline("2026-12-01T10:00:00Z"),
            Some(at("2026-12-01T10:30:00Z"))
        );
        // Activity within the minute leaves the stored deadline where it is.
        assert_eq!(
            deadline("2026-12-01T10:00:10Z"),
            deadline("2026-12-01T10:00:50Z")
        );
        let ended = view("2026-12-01T10:00:10Z", SessionStatus::Completed);
        assert_eq!(ended.idle_deadline(), None);
    }
}
