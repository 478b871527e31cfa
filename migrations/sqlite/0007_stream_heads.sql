-- The first event of every stream, so the periodic catch-up finds sessions without views by
-- visiting one index entry per session instead of scanning every event.
CREATE INDEX events_stream_heads ON events (aggregate_type, aggregate_id) WHERE sequence = 1;
