UPDATE researchers
SET revoked_at = $2
WHERE name = $1
  AND revoked_at IS NULL
