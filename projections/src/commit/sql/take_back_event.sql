DELETE FROM events
WHERE aggregate_type = $1
  AND aggregate_id = $2
  AND sequence = $3
