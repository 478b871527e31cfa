SELECT COUNT(*)
FROM runtime_processes
WHERE heartbeat_at >= $1 AND process_id <> $2
