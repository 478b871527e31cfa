SELECT key_id, COUNT(*)
FROM session_keys
GROUP BY key_id
ORDER BY key_id
