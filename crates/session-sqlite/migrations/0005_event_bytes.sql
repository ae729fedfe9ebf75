-- agent-session SQLite schema, version 5.
-- Each session keeps the bytes its events take as stored (the length of
-- their JSON bodies), which the bytes-per-session quota checks with every
-- append. Existing sessions are counted once here.
ALTER TABLE sessions ADD COLUMN event_bytes INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET event_bytes = (
    SELECT COALESCE(SUM(length(CAST(body AS BLOB))), 0) FROM events
    WHERE events.session_id = sessions.id
);
