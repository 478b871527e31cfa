SELECT e.aggregate_id
FROM events e
WHERE e.aggregate_type = $1
  AND e.sequence = 1
  AND NOT EXISTS (SELECT 1 FROM session_state s WHERE s.session_id = e.aggregate_id)
