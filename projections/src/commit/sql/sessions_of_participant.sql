SELECT session_id
FROM session_state
WHERE study_id = $1
  AND participant_ref = $2
  AND last_seq > 0
ORDER BY created_at
