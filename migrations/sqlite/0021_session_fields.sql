-- The fields extracted so far, one row per session and field (issue 36, "growth"): they were
-- kept inside session_state.state, which every commit rewrites whole, so a commit's cost grew
-- with every field a session had gathered. A commit now writes only the fields it changes. A
-- view like the others: rebuilt from the log, compared by `replay verify`, deleted by an
-- erasure. The server rebuilds every view when it starts on this version (view format 3).
CREATE TABLE session_fields
(
    session_id TEXT  NOT NULL,
    field_id   TEXT  NOT NULL,
    value      JSON  NOT NULL,
    PRIMARY KEY (session_id, field_id)
);
