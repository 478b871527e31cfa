//! Where a panel participant goes when the session ends: the study's `completion_redirect_url`
//! with `{participant_ref}` and `{outcome}` filled in (panels tell completes from screen-outs
//! this way).

use crate::decision::ConcludeReason;
use crate::events::SessionStatus;

/// How a session ended, as panels know it.
pub fn outcome(status: SessionStatus, reason: Option<ConcludeReason>) -> Option<&'static str> {
    use crate::decision::Stopped;
    match (status, reason.map(ConcludeReason::stopped)) {
        (SessionStatus::Completed, _) => Some("completed"),
        (SessionStatus::Abandoned, Some(Stopped::ScreenedOut)) => Some("screened_out"),
        (
            SessionStatus::Abandoned,
            None | Some(Stopped::Declined | Stopped::IdleExpired | Stopped::Otherwise),
        ) => Some("abandoned"),
        (
            SessionStatus::Created
            | SessionStatus::Active
            | SessionStatus::WaitingForUser
            | SessionStatus::WaitingForTool,
            _,
        ) => None,
    }
}

/// The redirect URL for an ended session, or `None` while it runs or when the study has none.
pub fn redirect_url(
    template: Option<&str>,
    participant_ref: Option<&str>,
    status: SessionStatus,
    reason: Option<ConcludeReason>,
) -> Option<String> {
    let outcome = outcome(status, reason)?;
    Some(
        template?
            .replace(
                "{participant_ref}",
                &encode(participant_ref.unwrap_or_default()),
            )
            .replace("{outcome}", outcome),
    )
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
fn encode(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for b in raw.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_and_the_reference_encoded() {
        let t = Some("https://panel.example/done?pid={participant_ref}&status={outcome}");
        assert_eq!(
            redirect_url(t, Some("a b&c"), SessionStatus::Completed, None).unwrap(),
            "https://panel.example/done?pid=a%20b%26c&status=completed"
        );
        assert_eq!(
            redirect_url(
                t,
                Some("p1"),
                SessionStatus::Abandoned,
                Some(ConcludeReason::ScreeningFailed)
            )
            .unwrap(),
            "https://panel.example/done?pid=p1&status=screened_out"
        );
        assert_eq!(
            redirect_url(t, None, SessionStatus::WaitingForUser, None),
            None
        );
        assert_eq!(
            redirect_url(None, Some("p1"), SessionStatus::Completed, None),
            None
        );
    }
}
