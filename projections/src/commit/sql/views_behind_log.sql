SELECT s.session_id
FROM session_state s
WHERE EXISTS (
  SELECT 1
  FROM events e
  WHERE e.aggregate_type = $1
    AND e.aggregate_id = s.session_id
    AND e.sequence > s.last_seq
)
