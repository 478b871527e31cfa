INSERT INTO runtime_processes (process_id, started_at, heartbeat_at)
VALUES ($1, $2, $2)
ON CONFLICT (process_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at
