//! `replay verify --access-log [--expect-row SEQ:HASH]`: the researchers' access log checked row
//! by row (`interview_projections::access_log::verify`), read-only; with a row an auditor kept
//! earlier, also that it is still there, unchanged — rows cut off the end and others appended
//! in their place leave a chain that holds, but not the kept row.

use std::process::ExitCode;

use interview_projections::access_log::{self, Filter};

use crate::source::SourceError;
use crate::{fail, open, VERIFY_FAILED};

/// Checks the chain (and the kept row); prints its length and head, or where it breaks.
pub async fn verify(url: &str, expect_row: Option<&str>) -> Result<(), ExitCode> {
    let kept = match expect_row.map(parse_row) {
        Some(Some(kept)) => Some(kept),
        Some(None) => {
            eprintln!("error: --expect-row takes SEQ:HASH, as a verify run prints its head");
            return Err(ExitCode::from(2));
        }
        None => None,
    };
    let db = open(url, false).await?;
    let database = |e: String| fail(SourceError::Database(e));
    let verified = access_log::verify(&db).await;
    let chain = match verified.map_err(|e| database(e.to_string()))? {
        Ok(chain) => chain,
        Err(broken) => {
            outln!(
                "FAILED    access log at row {}: {}",
                broken.seq,
                broken.problem
            );
            return Err(ExitCode::from(VERIFY_FAILED));
        }
    };
    if let Some((seq, hash)) = kept {
        let filter = Filter {
            after: seq - 1,
            limit: 1,
            ..Filter::default()
        };
        let found = access_log::page(&db, &filter).await;
        let found = found.map_err(|e| database(e.to_string()))?;
        if !found
            .first()
            .is_some_and(|row| row.seq == seq && row.hash == hash)
        {
            outln!("FAILED    access log: row {seq} is not the one kept (rows were cut off or replaced)");
            return Err(ExitCode::from(VERIFY_FAILED));
        }
    }
    outln!(
        "OK        access log: {} row(s), head {}:{}",
        chain.rows,
        chain.rows,
        chain.head
    );
    Ok(())
}

/// `SEQ:HASH`.
fn parse_row(text: &str) -> Option<(i64, String)> {
    let (seq, hash) = text.split_once(':')?;
    Some((seq.trim().parse().ok()?, hash.trim().to_string()))
}
