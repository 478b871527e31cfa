SELECT researcher_id
FROM researchers
WHERE name = $1
  AND revoked_at IS NULL
