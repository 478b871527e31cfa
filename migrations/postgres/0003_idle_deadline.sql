-- When an open session becomes idle (its last activity plus its study's idle TTL); the sweeper
-- looks here.
ALTER TABLE session_state ADD COLUMN idle_deadline timestamptz;
CREATE INDEX session_state_idle ON session_state (status, idle_deadline);
