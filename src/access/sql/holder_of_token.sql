SELECT r.name, r.researcher_id
FROM researcher_tokens t
         JOIN researchers r ON r.researcher_id = t.researcher_id
WHERE t.token_digest = $1
