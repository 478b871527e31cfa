-- The erasure records (participant.data.erased), found by session: the purge log, the receipt
-- an erasure answers again, and the retention sweep's "not erased yet" read them. Partial, so
-- no other event pays for it.
CREATE INDEX events_erasures ON events (aggregate_id) WHERE event_type = 'participant.data.erased';
