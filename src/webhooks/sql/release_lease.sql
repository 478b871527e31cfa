UPDATE webhooks
SET lease_holder = NULL, lease_until_micros = NULL
WHERE hook_id = $1
  AND lease_holder = $2
