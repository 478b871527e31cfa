UPDATE webhooks
SET delivered_through = $3, attempts = 0, retrying_since = NULL, next_attempt_micros = $4,
    failing = FALSE, last_error = NULL
WHERE study_id = $1
  AND hook_id = $2
