-- The decision log is no longer a stored read model: every field of it is in the session's
-- agent.decision.recorded events, so the table only doubled what each decision costs. The
-- researcher routes and `replay at` fold it from the log (projections/src/decision_log.rs);
-- nothing is lost with the table, since each of its rows is a copy of one event.
DROP TABLE decision_log;
