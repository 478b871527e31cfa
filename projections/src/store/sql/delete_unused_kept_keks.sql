DELETE FROM kept_key_encryption_keys
WHERE key_id <> $1
  AND NOT EXISTS (SELECT 1 FROM session_keys s WHERE s.key_id = kept_key_encryption_keys.key_id)
