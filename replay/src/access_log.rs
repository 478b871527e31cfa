//! `replay verify --access-log`: the researchers' access log checked row by row
//! (`interview_projections::access_log::verify`), read-only.

use std::process::ExitCode;

use interview_projections::access_log;

use crate::source::SourceError;
use crate::{fail, open, VERIFY_FAILED};

/// Checks the chain; prints its length and head, or the first row where it breaks.
pub async fn verify(url: &str) -> Result<(), ExitCode> {
    let db = open(url, false).await?;
    let verified = access_log::verify(&db)
        .await
        .map_err(|e| fail(SourceError::Database(e.to_string())))?;
    match verified {
        Ok(chain) => {
            outln!(
                "OK        access log: {} row(s), head {}",
                chain.rows,
                chain.head
            );
            Ok(())
        }
        Err(broken) => {
            outln!(
                "FAILED    access log at row {}: {}",
                broken.seq,
                broken.problem
            );
            Err(ExitCode::from(VERIFY_FAILED))
        }
    }
}
