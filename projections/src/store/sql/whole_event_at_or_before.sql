SELECT MAX(sequence)
FROM events
WHERE aggregate_type = $1
  AND aggregate_id = $2
  AND sequence <= $3
  AND event_version <> $4
  AND event_version <> $5
