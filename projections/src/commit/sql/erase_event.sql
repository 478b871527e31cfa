-- An event's erased form, on a row of its own: an event in clear that was written
-- inside another event's row (store/shared_rows.rs) gets its row back, and the row it shared
-- becomes its first event's (whose metadata it already holds).
INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, hash, sealed)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL)
ON CONFLICT (aggregate_type, aggregate_id, sequence) DO UPDATE
SET event_type = excluded.event_type,
    event_version = excluded.event_version,
    payload = excluded.payload,
    hash = excluded.hash,
    sealed = NULL
