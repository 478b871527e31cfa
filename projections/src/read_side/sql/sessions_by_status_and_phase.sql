SELECT status, current_phase, COUNT(*)
FROM session_state
WHERE last_seq > 0
GROUP BY status, current_phase
ORDER BY 1, 2
