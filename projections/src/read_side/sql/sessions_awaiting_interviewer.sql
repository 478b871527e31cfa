SELECT session_id
FROM session_state
WHERE idle_deadline IS NOT NULL
  AND status IN ('created', 'active')
  AND last_seq > 0
  AND updated_at <= $1
ORDER BY updated_at
LIMIT $2
