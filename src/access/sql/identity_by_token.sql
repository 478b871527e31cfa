SELECT r.researcher_id, r.name, r.admin, t.expires_at
FROM researcher_tokens t
         JOIN researchers r ON r.researcher_id = t.researcher_id
WHERE t.token_digest = $1
  AND t.revoked_at IS NULL
  AND r.revoked_at IS NULL
