DELETE FROM session_state
WHERE session_id = $1
