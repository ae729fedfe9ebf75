-- agent-session PostgreSQL schema, version 6.
-- Each session keeps the bytes its events take as stored (the length of
-- their JSON bodies), which the bytes-per-session quota checks with every
-- append. Existing sessions are counted once here.
ALTER TABLE __SCHEMA__.sessions ADD COLUMN IF NOT EXISTS event_bytes BIGINT NOT NULL DEFAULT 0;
UPDATE __SCHEMA__.sessions s SET event_bytes = (
    SELECT COALESCE(SUM(octet_length(e.body)), 0) FROM __SCHEMA__.events e
    WHERE e.session_id = s.id
);
