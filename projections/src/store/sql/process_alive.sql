SELECT COUNT(*)
FROM runtime_processes
WHERE process_id = $1
  AND heartbeat_at >= $2
