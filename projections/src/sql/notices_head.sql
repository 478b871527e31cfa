SELECT COALESCE(MAX(position), 0)
FROM study_notices
WHERE study_id = $1
