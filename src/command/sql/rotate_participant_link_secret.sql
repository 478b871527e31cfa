INSERT INTO participant_link_secrets (study_id, secret, require_reference, created_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (study_id) DO UPDATE
SET secret = excluded.secret,
    require_reference = excluded.require_reference,
    created_at = excluded.created_at
