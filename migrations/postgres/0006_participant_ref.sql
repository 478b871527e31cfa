-- The participant's own reference (a panel id), for the one-open-session-per-reference check.
ALTER TABLE session_state ADD COLUMN participant_ref TEXT;
CREATE INDEX session_state_participant ON session_state (study_id, participant_ref);
