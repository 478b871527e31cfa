DELETE FROM webhook_deliveries
WHERE hook_id = $1
