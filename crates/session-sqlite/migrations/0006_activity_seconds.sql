-- agent-session SQLite schema, version 6.
-- The activity indexes order sessions by `active_at`, the activity time in
-- whole seconds, instead of `updated_at` in microseconds: an append moves
-- `updated_at` every time, and with it an entry in each of the three
-- indexes, while `active_at` changes at most once a second. Lists order by
-- `active_at DESC, updated_at DESC, id`, the same order as before (the
-- seconds follow the microseconds), the index giving the seconds and a
-- sort the rest. A trigger keeps `active_at` in step with every write of
-- `updated_at`, and writes it only when the second changes.
ALTER TABLE sessions ADD COLUMN active_at INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET active_at = updated_at / 1000000;
DROP INDEX sessions_by_activity;
DROP INDEX sessions_by_owner;
DROP INDEX sessions_by_key;
CREATE INDEX sessions_by_activity ON sessions (active_at DESC, id);
CREATE INDEX sessions_by_owner ON sessions (app, user_id, active_at DESC, id);
CREATE INDEX sessions_by_key ON sessions (app, key, user_id, status, active_at DESC);
CREATE TRIGGER sessions_activity_insert AFTER INSERT ON sessions
    WHEN new.active_at <> new.updated_at / 1000000
BEGIN
    UPDATE sessions SET active_at = new.updated_at / 1000000 WHERE id = new.id;
END;
CREATE TRIGGER sessions_activity_update AFTER UPDATE OF updated_at ON sessions
    WHEN new.active_at <> new.updated_at / 1000000
BEGIN
    UPDATE sessions SET active_at = new.updated_at / 1000000 WHERE id = new.id;
END;
