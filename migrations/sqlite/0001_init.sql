-- Embedded store (SQLite). The events table is the one sqlite-es expects; everything else is
-- ours. Timestamps are RFC 3339 text, JSON is text.

-- The event log: the only source of truth.
CREATE TABLE events
(
    aggregate_type TEXT                         NOT NULL,
    aggregate_id   TEXT                         NOT NULL,
    sequence       BIGINT CHECK (sequence >= 0) NOT NULL,
    event_type     TEXT                         NOT NULL,
    event_version  TEXT                         NOT NULL,
    payload        JSON                         NOT NULL,
    metadata       JSON                         NOT NULL,
    PRIMARY KEY (aggregate_type, aggregate_id, sequence)
);

-- Studies and their published, content-addressed configuration documents.
CREATE TABLE studies
(
    study_id     TEXT PRIMARY KEY,
    status       TEXT NOT NULL CHECK (status IN ('draft', 'published', 'paused')),
    definition   TEXT NOT NULL,
    public_slug  TEXT UNIQUE,
    published    TEXT,
    published_at TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

CREATE TABLE config_documents
(
    version_id TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    document   TEXT NOT NULL,
    created_at TEXT NOT NULL
);

-- Read model: one row per session. last_seq is the last event sequence folded in.
CREATE TABLE session_state
(
    session_id               TEXT PRIMARY KEY,
    study_id                 TEXT    NOT NULL DEFAULT '',
    status                   TEXT    NOT NULL DEFAULT 'created',
    current_phase            TEXT    NOT NULL DEFAULT 'LOAD_CONTEXT',
    turn_count               BIGINT  NOT NULL DEFAULT 0,
    preview                  BOOLEAN NOT NULL DEFAULT FALSE,
    participant_token_sha256 TEXT    NOT NULL DEFAULT '',
    last_seq                 BIGINT  NOT NULL DEFAULT 0,
    created_at               TEXT,
    updated_at               TEXT,
    state                    TEXT    NOT NULL DEFAULT '{}'
);
CREATE INDEX session_state_by_study ON session_state (study_id, status, created_at);

-- Read model: the conversation, one row per utterance or answer, in event order.
CREATE TABLE transcript
(
    session_id     TEXT   NOT NULL,
    seq            BIGINT NOT NULL,
    turn_id        TEXT   NOT NULL,
    role           TEXT   NOT NULL CHECK (role IN ('user', 'assistant')),
    kind           TEXT   NOT NULL,
    content        TEXT   NOT NULL,
    interaction_id TEXT,
    created_at     TEXT   NOT NULL,
    PRIMARY KEY (session_id, seq)
);
