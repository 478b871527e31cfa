SELECT retained_since, session_id
FROM session_state
WHERE study_id = $1
  AND retained_since IS NOT NULL
  AND retained_since < $2
  AND (retained_since > $3 OR (retained_since = $3 AND session_id > $4))
ORDER BY retained_since, session_id
LIMIT $5
