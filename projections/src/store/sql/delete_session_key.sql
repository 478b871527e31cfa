DELETE FROM session_keys
WHERE aggregate_id = $1
