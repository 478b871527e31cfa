UPDATE webhooks
SET lease_holder = NULL, lease_until_micros = NULL,
    next_attempt_micros = CASE WHEN next_attempt_micros < $3 THEN $3 ELSE next_attempt_micros END
WHERE hook_id = $1
  AND lease_holder = $2
