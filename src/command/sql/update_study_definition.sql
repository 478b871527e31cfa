UPDATE studies
SET definition = $2, updated_at = $3
WHERE study_id = $1
