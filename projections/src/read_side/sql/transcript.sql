SELECT seq, turn_id, role, kind, content, interaction_id, created_at
FROM transcript
WHERE session_id = $1
ORDER BY seq
