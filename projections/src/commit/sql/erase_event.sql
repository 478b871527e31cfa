UPDATE events
SET event_version = $1, payload = $2, hash = $3, sealed = NULL
WHERE aggregate_type = $4
  AND aggregate_id = $5
  AND sequence = $6
