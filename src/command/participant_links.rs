//! Signed participant links (issue 30): a study's link secret, and the signature that proves a
//! `participant_ref` came from the study's panel rather than from a stranger who guessed it.
//!
//! A panel sends its participants to `/interview/{slug}?ref={participant_ref}&sig={signature}`, where
//! `signature` is the lowercase hex HMAC-SHA256 of the reference's UTF-8 bytes under the study's
//! link secret — what panel providers call a hashed or signed redirect. Once a study has a
//! secret (`POST /api/studies/{id}/participant-link-secret`, shown once), a create that names a
//! `participant_ref` without its valid signature is refused: nobody can start, hold or learn of a
//! session under a reference they cannot sign. Creates with no reference stay open.
//!
//! The secret is configuration, not interview history: it lives in its own table, never in an
//! event, a study document or a log line.

use chrono::Utc;
use hmac::{Hmac, Mac};
use interview_projections::{on_db, Db};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The signature a panel puts beside `participant_ref` in its link.
pub fn signature(secret: &str, participant_ref: &str) -> String {
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(participant_ref.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// Whether `signature` (hex, either case) signs `participant_ref` under `secret`, compared in
/// constant time.
pub fn verify(secret: &str, participant_ref: &str, signature: &str) -> bool {
    let Ok(given) = hex::decode(signature.trim()) else {
        return false;
    };
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(participant_ref.as_bytes());
    mac.verify_slice(&given).is_ok()
}

/// A new random secret: 32 bytes, hex (what a panel's settings page takes as text).
fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system gives random bytes");
    hex::encode(bytes)
}

/// How a study signs its links.
#[derive(Debug, Clone)]
pub struct Signing {
    pub secret: String,
    /// Every create must name a signed `participant_ref`: the study takes no anonymous
    /// participants, only its panel's.
    pub require_reference: bool,
}

/// How the study signs its links, if it does.
#[tracing::instrument(skip(db))]
pub async fn signing(db: &Db, study_id: &str) -> Result<Option<Signing>, sqlx::Error> {
    on_db!(read(db), |pool| {
        let row: Option<(String, bool)> =
            sqlx::query_as(include_str!("sql/participant_link_secret.sql"))
                .bind(study_id)
                .fetch_optional(pool)
                .await?;
        Ok(row.map(|(secret, require_reference)| Signing {
            secret,
            require_reference,
        }))
    })
}

/// Gives the study a new link secret (replacing any earlier one, whose links stop working) and
/// returns it: the only time it is shown.
#[tracing::instrument(skip(db))]
pub async fn rotate(
    db: &Db,
    study_id: &str,
    require_reference: bool,
) -> Result<String, sqlx::Error> {
    let secret = new_secret();
    on_db!(write(db), |pool| {
        sqlx::query(include_str!("sql/rotate_participant_link_secret.sql"))
            .bind(study_id)
            .bind(&secret)
            .bind(require_reference)
            .bind(Utc::now())
            .execute(pool)
            .await?;
    });
    Ok(secret)
}

/// Stops signing the study's links; whether it did.
#[tracing::instrument(skip(db))]
pub async fn remove(db: &Db, study_id: &str) -> Result<bool, sqlx::Error> {
    on_db!(write(db), |pool| {
        let done = sqlx::query(include_str!("sql/delete_participant_link_secret.sql"))
            .bind(study_id)
            .execute(pool)
            .await?;
        Ok(done.rows_affected() > 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_for_its_reference_only() {
        let sig = signature("s3cret", "panel-42");
        // RFC 2104 HMAC-SHA256, as `printf panel-42 | openssl dgst -sha256 -hmac s3cret` gives.
        assert_eq!(
            sig,
            "72d12a518b52325729417c057df597c413451a6f95edc488d3d097c955b44ef9"
        );
        assert!(verify("s3cret", "panel-42", &sig));
        assert!(verify("s3cret", "panel-42", &sig.to_uppercase()));
        assert!(!verify("s3cret", "panel-43", &sig));
        assert!(!verify("other", "panel-42", &sig));
        assert!(!verify("s3cret", "panel-42", "not hex"));
        assert!(!verify("s3cret", "panel-42", &sig[..62]));
    }
}
