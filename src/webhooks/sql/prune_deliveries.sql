DELETE FROM webhook_deliveries
WHERE hook_id = $1
  AND attempt <= (SELECT MAX(attempt) FROM webhook_deliveries WHERE hook_id = $1) - $2
