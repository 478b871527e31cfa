SELECT aggregate_id FROM events WHERE aggregate_type = $1
UNION
SELECT session_id FROM session_state
UNION
SELECT session_id FROM transcript
UNION
SELECT session_id FROM results
ORDER BY 1
