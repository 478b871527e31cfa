SELECT researcher_id, created_at, expires_at, revoked_at
FROM researcher_tokens
ORDER BY created_at
