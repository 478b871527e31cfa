DELETE
FROM study_roles
WHERE study_id = $2
  AND researcher_id = (SELECT researcher_id FROM researchers WHERE name = $1)
