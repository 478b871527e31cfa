-- Read model: one row per completed, non-preview session, with its output fields
-- (value, confidence, evidence turn ids, quote).
CREATE TABLE results
(
    session_id        text PRIMARY KEY,
    study_id          text        NOT NULL,
    participant_ref   text,
    completed_at      timestamptz NOT NULL,
    end_reason        text,
    summary           text,
    summary_confirmed boolean,
    fields            jsonb       NOT NULL,
    last_seq          bigint      NOT NULL
);
CREATE INDEX results_by_study ON results (study_id, completed_at, session_id);

-- Read model: every interviewer decision, in event order.
CREATE TABLE decision_log
(
    session_id        text        NOT NULL,
    seq               bigint      NOT NULL,
    decision_id       text        NOT NULL,
    turn_id           text,
    phase             text        NOT NULL,
    selected_action   jsonb       NOT NULL,
    proposed_action   jsonb,
    rationale         text        NOT NULL,
    model             text        NOT NULL,
    prompt_version_id text        NOT NULL,
    latency_ms        bigint      NOT NULL,
    token_usage       jsonb       NOT NULL,
    input_summary     text        NOT NULL,
    created_at        timestamptz NOT NULL,
    PRIMARY KEY (session_id, seq)
);
