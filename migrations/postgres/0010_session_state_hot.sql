-- session_state is updated by every command. On PostgreSQL an update that changes no indexed
-- column and finds room on its page is heap-only (HOT): no new index entries, and the old row
-- version is pruned without waiting for a vacuum. So the indexes leave out what changes on every
-- turn: the status is filtered on the rows instead, and the idle deadline is stored rounded up to
-- the minute (projections/src/views.rs), so it moves at most once a minute.
-- Stored deadlines rounded like the ones written from now on, so views written before verify.
UPDATE session_state
SET idle_deadline = date_trunc('minute', idle_deadline)
    + CASE WHEN date_trunc('minute', idle_deadline) = idle_deadline THEN interval '0 minutes' ELSE interval '1 minute' END
WHERE idle_deadline IS NOT NULL;
DROP INDEX session_state_by_study;
CREATE INDEX session_state_by_study ON session_state (study_id, created_at);
DROP INDEX session_state_idle;
CREATE INDEX session_state_idle ON session_state (idle_deadline) WHERE idle_deadline IS NOT NULL;
-- Room on each page for the next versions of its rows.
ALTER TABLE session_state SET (fillfactor = 70);
