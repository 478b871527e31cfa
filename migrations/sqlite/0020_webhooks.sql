-- Webhooks (issue 35, src/webhooks/, docs/webhooks.md).

-- What each study announces to outside systems, in the order it was committed: one row per fact
-- a webhook may carry (a session completed with its final extraction, abandoned, erased; the
-- study paused or resumed), written in the transaction that commits the fact. `position` counts
-- from 1 per study, taken from the study's row in study_notice_heads (whose row lock orders two
-- commits of one study), so it is also commit order. A row holds no content: a delivery reads
-- what it sends when it sends it, so an erasure reaches every later one.
CREATE TABLE study_notice_heads
(
    study_id TEXT PRIMARY KEY,
    head     BIGINT NOT NULL
);

CREATE TABLE study_notices
(
    study_id    TEXT   NOT NULL,
    position    BIGINT NOT NULL,
    kind        TEXT   NOT NULL,
    -- The session and the event of its log the notice stands for (none for a study's own).
    session_id  TEXT,
    sequence    BIGINT,
    at_micros   BIGINT NOT NULL,
    PRIMARY KEY (study_id, position)
);

-- A study's subscriptions. `delivered_through` is the cursor: every notice up to that position
-- was answered with a 2xx (or is of a kind the subscription does not take). The secret signs
-- every delivery; it is shown once, when the subscription is made.
CREATE TABLE webhooks
(
    hook_id            TEXT PRIMARY KEY,
    study_id           TEXT    NOT NULL,
    url                TEXT    NOT NULL,
    -- A JSON array of the notice kinds delivered.
    events             TEXT    NOT NULL,
    secret             TEXT    NOT NULL,
    created_by         TEXT    NOT NULL,
    created_micros     BIGINT  NOT NULL,
    delivered_through  BIGINT  NOT NULL,
    -- Failed attempts at the next notice, since when, and when the next attempt is due.
    attempts           INTEGER NOT NULL DEFAULT 0,
    retrying_since     BIGINT,
    next_attempt_micros BIGINT NOT NULL,
    -- Retried for the whole retry window without a 2xx: no attempt until a redelivery.
    failing            BOOLEAN NOT NULL DEFAULT FALSE,
    last_error         TEXT,
    -- The process delivering it now, and until when its lease holds.
    lease_holder       TEXT,
    lease_until_micros BIGINT
);
CREATE INDEX webhooks_by_study ON webhooks (study_id);
CREATE INDEX webhooks_due ON webhooks (failing, next_attempt_micros);

-- Every delivery attempt: what was sent (the notice and its webhook-id) and what came back. A
-- response body is kept only as a short excerpt.
CREATE TABLE webhook_deliveries
(
    hook_id          TEXT    NOT NULL,
    attempt          BIGINT  NOT NULL,
    position         BIGINT  NOT NULL,
    kind             TEXT    NOT NULL,
    message_id       TEXT    NOT NULL,
    at_micros        BIGINT  NOT NULL,
    status           INTEGER,
    latency_ms       BIGINT  NOT NULL,
    error            TEXT,
    response_excerpt TEXT,
    PRIMARY KEY (hook_id, attempt)
);
