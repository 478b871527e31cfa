SELECT r.name, s.role, s.granted_at
FROM study_roles s
         JOIN researchers r ON r.researcher_id = s.researcher_id
WHERE s.study_id = $1
  AND r.revoked_at IS NULL
ORDER BY r.name
