-- The erasure records (participant.data.erased), found by session: the purge log and the receipt
-- an erasure answers again read them. Partial, so no other event pays for it.
CREATE INDEX events_erasures ON events (aggregate_id) WHERE event_type = 'participant.data.erased';

-- When an ended session's data began to be kept (its end), for the study's retention; null while
-- it runs and once its data is erased. Set once per session, so indexing it costs a running
-- session's updates nothing (they stay heap-only).
ALTER TABLE session_state ADD COLUMN retained_since timestamptz;
-- Cut to whole microseconds (logs written before events were stamped in microseconds carry
-- nanoseconds; a cast would round them, the views truncate).
UPDATE session_state
SET retained_since = regexp_replace(state ->> 'ended_at', '(\.[0-9]{6})[0-9]+', '\1')::timestamptz
WHERE state ->> 'ended_at' IS NOT NULL AND state -> 'erasure' IS NULL
  AND status IN ('completed', 'abandoned');
CREATE INDEX session_state_retained ON session_state (study_id, retained_since)
    WHERE retained_since IS NOT NULL;

-- Sessions written before the participant_ref column existed (migration 0006) have the panel id
-- in their state document only: a data-subject request finds them by the column.
UPDATE session_state
SET participant_ref = state ->> 'participant_ref'
WHERE participant_ref IS NULL AND state ->> 'participant_ref' IS NOT NULL;
