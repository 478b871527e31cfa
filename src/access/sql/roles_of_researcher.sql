SELECT study_id, role
FROM study_roles
WHERE researcher_id = $1
