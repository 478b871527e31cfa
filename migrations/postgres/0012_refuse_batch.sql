-- The one-statement group commit (projections/src/one_statement.rs) ends with a check that
-- every event went in and every state row was where the fold started; when it does not hold,
-- this raises, and the statement (its own transaction) leaves nothing behind. A function, so the
-- check is evaluated only when reached: PostgreSQL folds constant expressions before it runs.
CREATE OR REPLACE FUNCTION interview_refuse_batch() RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'a commit check failed: a sequence was taken or a view was stale'
        USING ERRCODE = 'IR001';
END
$$;
