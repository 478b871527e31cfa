SELECT participant_token_sha256
FROM session_state
WHERE session_id = $1
  AND last_seq > 0
