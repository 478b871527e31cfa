INSERT INTO config_documents (version_id, kind, document, created_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (version_id) DO NOTHING
