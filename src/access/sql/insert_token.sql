INSERT INTO researcher_tokens (token_digest, researcher_id, created_at, expires_at)
VALUES ($1, $2, $3, $4)
