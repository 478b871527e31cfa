-- Per-session data keys (docs/privacy.md): each wraps, under a key-encryption key named by
-- key_id, the key that encrypts the session's personal content in `events`. Kept apart from the
-- log so that deleting one row (an erasure) leaves that content unreadable for good.
CREATE TABLE session_keys (
    aggregate_id TEXT PRIMARY KEY,
    key_id TEXT NOT NULL,
    wrapped BYTEA NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX session_keys_key_id ON session_keys (key_id);

-- The key-encryption key the server generated because none was configured (docs/privacy.md:
-- set DATA_KEY to keep it apart from the database). Configuring DATA_KEY moves every session
-- key under it and deletes this row.
CREATE TABLE kept_key_encryption_keys (
    key_id TEXT PRIMARY KEY,
    key BYTEA NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

-- An encrypted event's sealed bytes (nonce, ciphertext, tag), beside a payload that keeps only
-- its time: in a column of bytes rather than base64 inside the JSON, a third smaller.
ALTER TABLE events ADD COLUMN sealed BYTEA;
