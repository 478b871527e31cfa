SELECT attempt, position, kind, message_id, at_micros, status, latency_ms, error, response_excerpt
FROM webhook_deliveries
WHERE hook_id = $1
  AND attempt < $2
ORDER BY attempt DESC
LIMIT $3
