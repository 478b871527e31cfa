-- Read model: each study's overview (docs/overview.md), kept as named whole counts — the funnel,
-- where sessions stopped, and for completed interviews durations, turns, objectives, fields and
-- model spend — so the overview of a study of any size is one indexed read of a few hundred rows.
CREATE TABLE study_overview
(
    study_id TEXT   NOT NULL,
    name     TEXT   NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (study_id, name)
) WITHOUT ROWID;

-- What each session last added to study_overview (its counts by name): when the session's
-- contribution moves, the projection adds the difference, in the transaction of its events.
CREATE TABLE session_overview
(
    session_id   TEXT PRIMARY KEY,
    study_id     TEXT  NOT NULL,
    contribution TEXT  NOT NULL
) WITHOUT ROWID;
