SELECT session_id
FROM session_state
WHERE status IN ('created', 'active', 'waiting_for_user', 'waiting_for_tool')
  AND idle_deadline < $1
ORDER BY idle_deadline
LIMIT $2
