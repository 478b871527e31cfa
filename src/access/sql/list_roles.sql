SELECT researcher_id, study_id, role
FROM study_roles
ORDER BY study_id
