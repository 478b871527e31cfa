-- Read model: each study's overview (docs/overview.md), kept as named whole counts — the funnel,
-- where sessions stopped, and for completed interviews durations, turns, objectives, fields and
-- model spend — so the overview of a study of any size is one indexed read of a few hundred rows.
CREATE TABLE study_overview
(
    study_id text   NOT NULL,
    name     text   NOT NULL,
    n        bigint NOT NULL,
    PRIMARY KEY (study_id, name)
);

-- What each session last added to study_overview (its counts by name): when the session's
-- contribution moves, the projection adds the difference, in the transaction of its events.
CREATE TABLE session_overview
(
    session_id   text PRIMARY KEY,
    study_id     text  NOT NULL,
    contribution jsonb NOT NULL
);
