-- agent-session PostgreSQL schema, version 7.
-- The activity indexes order sessions by `active_at`, the activity time in
-- whole seconds, instead of `updated_at` in microseconds. An append moves
-- `updated_at` every time; as an indexed column it made every append's
-- update of the session row a new row version with new entries in each
-- activity index (and in the metadata index), and a session appended to
-- thousands of times left thousands of dead entries under its id for every
-- later lookup to step over until vacuum (measured on the bench's W1:
-- after a few runs, appends at a third of the speed of a new schema).
-- `active_at` changes at most once a second, so the other updates leave
-- every index alone and PostgreSQL updates the row in place (a HOT
-- update), for which the table keeps a fifth of each page free. Lists order by `active_at DESC,
-- updated_at DESC, id`, the same order as before (the seconds follow the
-- microseconds). Every statement that writes `updated_at` writes
-- `active_at` from the same value.
ALTER TABLE __SCHEMA__.sessions ADD COLUMN IF NOT EXISTS active_at BIGINT NOT NULL DEFAULT 0;
UPDATE __SCHEMA__.sessions SET active_at = updated_at / 1000000;
DROP INDEX IF EXISTS __SCHEMA__.sessions_by_activity;
DROP INDEX IF EXISTS __SCHEMA__.sessions_by_owner;
DROP INDEX IF EXISTS __SCHEMA__.sessions_by_key;
CREATE INDEX sessions_by_activity ON __SCHEMA__.sessions (active_at DESC, id);
CREATE INDEX sessions_by_owner ON __SCHEMA__.sessions (app, user_id, active_at DESC, id);
CREATE INDEX sessions_by_key ON __SCHEMA__.sessions (app, key, user_id, status, active_at DESC);
ALTER TABLE __SCHEMA__.sessions SET (fillfactor = 80);
