SELECT key_id, wrapped
FROM session_keys
WHERE aggregate_id = $1
