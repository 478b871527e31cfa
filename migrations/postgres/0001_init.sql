-- Production store (PostgreSQL). The events table is the one postgres-es expects; everything
-- else is ours.

-- The event log: the only source of truth.
CREATE TABLE events
(
    aggregate_type text                         NOT NULL,
    aggregate_id   text                         NOT NULL,
    sequence       bigint CHECK (sequence >= 0) NOT NULL,
    event_type     text                         NOT NULL,
    event_version  text                         NOT NULL,
    payload        jsonb                        NOT NULL,
    metadata       jsonb                        NOT NULL,
    PRIMARY KEY (aggregate_type, aggregate_id, sequence)
);

-- Studies and their published, content-addressed configuration documents.
CREATE TABLE studies
(
    study_id     text PRIMARY KEY,
    status       text        NOT NULL CHECK (status IN ('draft', 'published', 'paused')),
    definition   jsonb       NOT NULL,
    public_slug  text UNIQUE,
    published    jsonb,
    published_at timestamptz,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);

CREATE TABLE config_documents
(
    version_id text PRIMARY KEY,
    kind       text        NOT NULL,
    document   jsonb       NOT NULL,
    created_at timestamptz NOT NULL
);

-- Read model: one row per session. last_seq is the last event sequence folded in.
CREATE TABLE session_state
(
    session_id               text PRIMARY KEY,
    study_id                 text        NOT NULL DEFAULT '',
    status                   text        NOT NULL DEFAULT 'created',
    current_phase            text        NOT NULL DEFAULT 'LOAD_CONTEXT',
    turn_count               bigint      NOT NULL DEFAULT 0,
    preview                  boolean     NOT NULL DEFAULT FALSE,
    participant_token_sha256 text        NOT NULL DEFAULT '',
    last_seq                 bigint      NOT NULL DEFAULT 0,
    created_at               timestamptz,
    updated_at               timestamptz,
    state                    jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX session_state_by_study ON session_state (study_id, status, created_at);

-- Read model: the conversation, one row per utterance or answer, in event order.
CREATE TABLE transcript
(
    session_id     text        NOT NULL,
    seq            bigint      NOT NULL,
    turn_id        text        NOT NULL,
    role           text        NOT NULL CHECK (role IN ('user', 'assistant')),
    kind           text        NOT NULL,
    content        text        NOT NULL,
    interaction_id text,
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (session_id, seq)
);
