SELECT researcher_id, name, admin, created_at, revoked_at
FROM researchers
ORDER BY name
