SELECT document
FROM config_documents
WHERE version_id = $1
