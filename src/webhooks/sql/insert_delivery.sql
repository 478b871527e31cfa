INSERT INTO webhook_deliveries (hook_id, attempt, position, kind, message_id, at_micros, status,
                                latency_ms, error, response_excerpt)
SELECT $1, COALESCE(MAX(attempt), 0) + 1, $2, $3, $4, $5, $6, $7, $8, $9
FROM webhook_deliveries
WHERE hook_id = $1
