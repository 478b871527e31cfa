UPDATE webhooks
SET delivered_through = $4, attempts = 0, retrying_since = NULL, last_error = NULL,
    next_attempt_micros = $6, lease_until_micros = $5
WHERE hook_id = $1
  AND lease_holder = $2
  AND delivered_through = $3
