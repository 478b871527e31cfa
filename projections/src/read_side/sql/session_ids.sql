SELECT aggregate_id
FROM events
WHERE aggregate_type = $1
  AND sequence = 1
ORDER BY payload->>'at', aggregate_id
