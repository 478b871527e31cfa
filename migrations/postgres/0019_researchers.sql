-- Researchers as people (issue 34, src/access/): a name, API tokens (SHA-256 digests only; a
-- token is shown once), and a role per study. Configuration, not interview history: kept out
-- of the event log. RESEARCHER_TOKENS (configured admins) have no rows here.
CREATE TABLE researchers
(
    researcher_id TEXT PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    -- Every study, every route, and managing researchers.
    admin         BOOLEAN NOT NULL DEFAULT FALSE,
    created_at    timestamptz NOT NULL,
    -- Set by a revoke: every token of the researcher stops working at once.
    revoked_at    timestamptz
);

CREATE TABLE researcher_tokens
(
    token_digest  TEXT PRIMARY KEY,
    researcher_id TEXT NOT NULL REFERENCES researchers (researcher_id),
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz,
    revoked_at    timestamptz
);
CREATE INDEX researcher_tokens_by_researcher ON researcher_tokens (researcher_id);

-- A researcher's role on a study: owner (edit, publish, pause, grant, erase), analyst (read
-- sessions and results, export), viewer (read sessions, no results or exports).
CREATE TABLE study_roles
(
    researcher_id TEXT NOT NULL REFERENCES researchers (researcher_id),
    study_id      TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('owner', 'analyst', 'viewer')),
    granted_at    timestamptz NOT NULL,
    PRIMARY KEY (researcher_id, study_id)
);
CREATE INDEX study_roles_by_study ON study_roles (study_id);

-- The access log (projections/src/access_log.rs): who read, exported, erased, granted or
-- revoked what, when, from where — and every refusal of a researcher's request. Append-only
-- and hash-chained: each row's hash covers the row before it (`replay verify --access-log`).
CREATE TABLE access_log
(
    seq           BIGINT PRIMARY KEY,
    -- When, in microseconds since the Unix epoch (one portable form to filter and hash).
    at_micros     BIGINT NOT NULL,
    -- The researcher's name (`token:<8 hex>` for a configured token; `unverified token` for a
    -- JWT whose signature did not hold), and id when they have one.
    researcher    TEXT NOT NULL,
    researcher_id TEXT,
    method        TEXT NOT NULL,
    -- The route as registered (`/api/sessions/{session_id}/transcript`), and what it touched.
    route         TEXT NOT NULL,
    study_id      TEXT,
    session_id    TEXT,
    -- What a change changed, in words (`grant Vera analyst`, `revoke Vera`, `erase 2 session(s)`).
    detail        TEXT,
    -- The HTTP status the request was answered with (403: refused).
    status        INTEGER NOT NULL,
    address       TEXT NOT NULL,
    request_id    TEXT NOT NULL,
    prev_hash     TEXT NOT NULL,
    hash          TEXT NOT NULL
);
CREATE INDEX access_log_by_study ON access_log (study_id, seq);
