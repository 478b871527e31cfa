-- A study's participant-link secret (src/command/participant_links.rs): the key panels sign
-- participant references with. Configuration, not history: kept out of the event log.
CREATE TABLE participant_link_secrets
(
    study_id   TEXT PRIMARY KEY,
    secret     TEXT NOT NULL,
    -- Whether a create must name a signed participant_ref (no anonymous participants).
    require_reference BOOLEAN NOT NULL DEFAULT FALSE,
    created_at timestamptz NOT NULL
);
