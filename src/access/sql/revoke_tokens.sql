UPDATE researcher_tokens
SET revoked_at = $2
WHERE revoked_at IS NULL
  AND researcher_id = (SELECT researcher_id FROM researchers WHERE name = $1)
