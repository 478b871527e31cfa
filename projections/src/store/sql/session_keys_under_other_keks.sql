SELECT aggregate_id, key_id, wrapped
FROM session_keys
WHERE key_id <> $1
ORDER BY aggregate_id
LIMIT 500
