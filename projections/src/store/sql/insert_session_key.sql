INSERT INTO session_keys (aggregate_id, key_id, wrapped, created_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (aggregate_id) DO NOTHING
