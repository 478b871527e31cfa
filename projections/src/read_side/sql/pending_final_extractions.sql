SELECT session_id
FROM session_state
WHERE needs_final_extraction = TRUE
LIMIT $1
