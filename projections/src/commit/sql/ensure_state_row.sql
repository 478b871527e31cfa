INSERT INTO session_state (session_id)
VALUES ($1)
ON CONFLICT (session_id) DO NOTHING
