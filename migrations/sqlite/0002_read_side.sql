-- Read model: one row per completed, non-preview session, with its output fields
-- (value, confidence, evidence turn ids, quote).
CREATE TABLE results
(
    session_id        TEXT PRIMARY KEY,
    study_id          TEXT    NOT NULL,
    participant_ref   TEXT,
    completed_at      TEXT    NOT NULL,
    end_reason        TEXT,
    summary           TEXT,
    summary_confirmed BOOLEAN,
    fields            TEXT    NOT NULL,
    last_seq          BIGINT  NOT NULL
);
CREATE INDEX results_by_study ON results (study_id, completed_at, session_id);

-- Read model: every interviewer decision, in event order.
CREATE TABLE decision_log
(
    session_id        TEXT   NOT NULL,
    seq               BIGINT NOT NULL,
    decision_id       TEXT   NOT NULL,
    turn_id           TEXT,
    phase             TEXT   NOT NULL,
    selected_action   TEXT   NOT NULL,
    proposed_action   TEXT,
    rationale         TEXT   NOT NULL,
    model             TEXT   NOT NULL,
    prompt_version_id TEXT   NOT NULL,
    latency_ms        BIGINT NOT NULL,
    token_usage       TEXT   NOT NULL,
    input_summary     TEXT   NOT NULL,
    created_at        TEXT   NOT NULL,
    PRIMARY KEY (session_id, seq)
);
