SELECT position, kind, session_id, sequence, at_micros
FROM study_notices
WHERE study_id = $1
  AND position > $2
ORDER BY position
LIMIT $3
