-- The format the stored views were folded in (projections/src/view_format.rs). No row: the
-- format before this table (1). The server rebuilds every session's views at start-up when
-- the code folds a newer format, then records it here.
CREATE TABLE view_format
(
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    version   BIGINT NOT NULL
);
