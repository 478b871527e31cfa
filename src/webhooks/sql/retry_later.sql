UPDATE webhooks
SET attempts = attempts + 1, retrying_since = COALESCE(retrying_since, $4),
    next_attempt_micros = $5,
    -- Failing once the notice has been retried since before $6 (the window's start).
    failing = (COALESCE(retrying_since, $4) <= $6), last_error = $7,
    lease_holder = NULL, lease_until_micros = NULL
WHERE hook_id = $1
  AND lease_holder = $2
  AND delivered_through = $3
RETURNING failing
