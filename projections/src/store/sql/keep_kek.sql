INSERT INTO kept_key_encryption_keys (key_id, key, created_at)
SELECT $1, $2, $3
WHERE NOT EXISTS (SELECT 1 FROM kept_key_encryption_keys)
