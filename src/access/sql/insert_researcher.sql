INSERT INTO researchers (researcher_id, name, admin, created_at)
VALUES ($1, $2, $3, $4)
