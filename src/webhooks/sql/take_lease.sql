UPDATE webhooks
SET lease_holder = $2, lease_until_micros = $3
WHERE hook_id = $1
  AND failing = FALSE
  AND (lease_holder IS NULL OR lease_holder = $2 OR lease_until_micros < $4
       OR NOT EXISTS (SELECT 1 FROM runtime_processes p
                      WHERE p.process_id = webhooks.lease_holder AND p.heartbeat_at >= $5))
RETURNING study_id
