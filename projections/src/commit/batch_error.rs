//! How a failed commit batch is judged, on both commit paths ([`crate::commit::group_commit`] and
//! [`crate::commit::one_statement`]): whether one command may be at fault (the batch is split to find
//! it), and what every command of a batch that failed as a whole is told.

use cqrs_es::persist::PersistenceError;

use crate::store::error::ProjectionError;

/// An error that may be one command's fault: a value the database refuses (PostgreSQL's data
/// exceptions and constraint violations, SQLite's constraint, mismatch and too-big errors), or
/// one that cannot be encoded or decoded. Anything else — the database down, out of
/// connections, timing out, a deadlock — would fail every half alike: splitting would only
/// multiply the load on a database already in trouble.
pub(crate) fn one_commands_fault(error: &ProjectionError) -> bool {
    match error {
        ProjectionError::Decode { .. } | ProjectionError::ErasureMismatch { .. } => true,
        ProjectionError::Db(sqlx::Error::Database(e)) => {
            let code = e.code();
            let code = code.as_deref().unwrap_or_default();
            if code.len() == 5 {
                // A PostgreSQL SQLSTATE: class 22 (data exception), 23 (integrity constraint).
                code.starts_with("22") || code.starts_with("23")
            } else {
                // A SQLite result code: 18 too big, 19 constraint, 20 mismatch (the extended
                // codes keep the primary code in their low byte).
                code.parse::<u32>()
                    .is_ok_and(|c| matches!(c & 0xff, 18..=20))
            }
        }
        ProjectionError::Db(
            sqlx::Error::Encode(_) | sqlx::Error::Decode(_) | sqlx::Error::ColumnDecode { .. },
        ) => true,
        ProjectionError::Db(_) => false,
        // A session key that does not unwrap is that session's.
        ProjectionError::Keys(crate::store::keys::KeyError::Unwrap { .. }) => true,
        ProjectionError::Keys(_) => false,
    }
}

/// What every command of a failed batch is told. A deadlock or serialization failure between
/// processes writing the same sessions is a lost race like any other: the caller retries.
pub(crate) fn batch_error(error: &ProjectionError) -> PersistenceError {
    let message = error.to_string();
    match error {
        ProjectionError::Db(sqlx::Error::Database(e))
            if matches!(e.code().as_deref(), Some("40P01" | "40001")) =>
        {
            PersistenceError::OptimisticLockError
        }
        ProjectionError::Db(e) if crate::store::db::is_unavailable(e) => {
            PersistenceError::ConnectionError(message.into())
        }
        _ => PersistenceError::UnknownError(message.into()),
    }
}
