INSERT INTO studies (study_id, status, definition, created_at, updated_at)
VALUES ($1, 'draft', $2, $3, $3)
