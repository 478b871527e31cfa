UPDATE studies
SET status = $2, updated_at = $3
WHERE study_id = $1
  AND status <> $2
