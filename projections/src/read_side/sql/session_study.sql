SELECT study_id
FROM session_state
WHERE session_id = $1
  AND last_seq > 0
