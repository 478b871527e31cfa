SELECT key
FROM kept_key_encryption_keys
ORDER BY created_at, key_id
