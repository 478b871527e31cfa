UPDATE session_keys
SET key_id = $1, wrapped = $2
WHERE aggregate_id = $3
  AND key_id = $4
