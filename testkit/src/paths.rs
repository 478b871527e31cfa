//! The API's addresses, typed: a test names the route it calls instead of building its path.

use std::fmt::Display;

/// `/api/sessions/{session}`: a session as its participant or a researcher reads it.
pub fn session(session: impl Display) -> String {
    format!("/api/sessions/{session}")
}

/// `/api/sessions/{session}/messages`.
pub fn messages(session: impl Display) -> String {
    format!("/api/sessions/{session}/messages")
}

/// `/api/sessions/{session}/interactions/{interaction}/submit`.
pub fn submit(session: impl Display, interaction: impl Display) -> String {
    format!("/api/sessions/{session}/interactions/{interaction}/submit")
}

/// `/api/sessions/{session}/end`.
pub fn end(session: impl Display) -> String {
    format!("/api/sessions/{session}/end")
}

/// `/api/sessions/{session}/withdraw`.
pub fn withdraw(session: impl Display) -> String {
    format!("/api/sessions/{session}/withdraw")
}

/// `/api/sessions/{session}/stream`.
pub fn stream(session: impl Display) -> String {
    format!("/api/sessions/{session}/stream")
}

/// `/api/sessions/{session}/agui`.
pub fn agui(session: impl Display) -> String {
    format!("/api/sessions/{session}/agui")
}

/// `/api/sessions/{session}/events`: the session's raw log, for researchers.
pub fn events(session: impl Display) -> String {
    format!("/api/sessions/{session}/events")
}

/// `/api/public/studies/{slug}/sessions`: joining a study by its public link.
pub fn join(slug: impl Display) -> String {
    format!("/api/public/studies/{slug}/sessions")
}

/// `/api/studies/{study}`.
pub fn study(study: impl Display) -> String {
    format!("/api/studies/{study}")
}

/// `/api/studies/{study}/results` (`results.csv`, `results.jsonl`: add the extension).
pub fn results(study: impl Display) -> String {
    format!("/api/studies/{study}/results")
}

/// `/api/studies/{study}/publish`.
pub fn publish(study: impl Display) -> String {
    format!("/api/studies/{study}/publish")
}

/// `/api/studies/{study}/overview`.
pub fn overview(study: impl Display) -> String {
    format!("/api/studies/{study}/overview")
}

/// `/api/studies/{study}/erasures`.
pub fn erasures(study: impl Display) -> String {
    format!("/api/studies/{study}/erasures")
}
