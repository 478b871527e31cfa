-- Completed sessions whose post-session extraction has not completed yet.
ALTER TABLE session_state ADD COLUMN needs_final_extraction BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX session_state_final_extraction ON session_state (needs_final_extraction);
