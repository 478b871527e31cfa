INSERT INTO study_roles (researcher_id, study_id, role, granted_at)
SELECT researcher_id, $2, $3, $4
FROM researchers
WHERE name = $1
  AND revoked_at IS NULL
ON CONFLICT (researcher_id, study_id) DO UPDATE SET role = excluded.role, granted_at = excluded.granted_at
