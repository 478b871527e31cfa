-- Since 2026-12-05 a row of `events` may hold events in clear beside its own (`preceded_by`,
-- `followed_by` in its payload; one 32-byte hash per event in `hash`), and a sealed payload may
-- be deflated before it is sealed (projections/src/store/shared_rows.rs, encrypted.rs;
-- docs/audit.md, "shared rows"). A build from before cannot read either. Nothing in the schema
-- changes: this migration marks the format, so an older build refuses to start on a database a
-- newer one has written (sqlx finds an applied migration it does not know) instead of failing
-- on the first shared row it reads.
SELECT 1;
