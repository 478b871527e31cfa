SELECT event_version
FROM events
WHERE aggregate_type = $1
  AND aggregate_id = $2
ORDER BY sequence
