-- Server processes sharing this database, with a heartbeat: a claim on a session's next
-- utterance whose process has stopped beating is taken over at once instead of waiting for it
-- to go stale.
CREATE TABLE runtime_processes
(
    process_id   TEXT PRIMARY KEY,
    started_at   TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL
);
