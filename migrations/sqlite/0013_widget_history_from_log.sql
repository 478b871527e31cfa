-- A session's tool calls and interaction events are no longer copied into its session_state
-- document (rewritten by every command, it grew with each widget): the researcher routes fold
-- them from the log, where they are already (projections/src/widget_history.rs). Documents
-- written before lose the copies, so they agree with the ones written and rebuilt from now on.
UPDATE session_state
SET state = json_remove(state, '$.tool_calls', '$.interaction_events')
WHERE json_type(state, '$.tool_calls') IS NOT NULL
   OR json_type(state, '$.interaction_events') IS NOT NULL;
