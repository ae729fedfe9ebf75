-- agent-session SQLite schema, version 7.
-- `events` keys its rows by a plain INTEGER PRIMARY KEY instead of
-- AUTOINCREMENT, whose counter (a row of `sqlite_sequence`) was one more
-- page written with every append. A new row takes the highest rowid + 1,
-- so deleting the newest rows frees their rowids for the next ones; the
-- search index's watermark (`fts_state.indexed_through`, "every row up to
-- here is indexed") stays true because a trigger lowers it to the highest
-- rowid left whenever the highest row goes, and rows above it are indexed
-- in the next batch as before. SQLite cannot drop AUTOINCREMENT in place:
-- the table is rebuilt, rowids kept (the index entries point at them).
CREATE TABLE events_v7 (
    rowid          INTEGER PRIMARY KEY,
    session_id     TEXT    NOT NULL,
    seq            INTEGER NOT NULL,
    id             TEXT    NOT NULL,
    ctx_pos        INTEGER,
    timestamp      INTEGER NOT NULL,
    role           TEXT    NOT NULL,
    branch         TEXT,
    invocation_id  TEXT,
    synthetic      INTEGER NOT NULL,
    token_estimate INTEGER NOT NULL,
    state_delta    TEXT,
    body           TEXT    NOT NULL
);
INSERT INTO events_v7 (rowid, session_id, seq, id, ctx_pos, timestamp, role, branch,
                       invocation_id, synthetic, token_estimate, state_delta, body)
    SELECT rowid, session_id, seq, id, ctx_pos, timestamp, role, branch,
           invocation_id, synthetic, token_estimate, state_delta, body
    FROM events ORDER BY rowid;
DROP TABLE events;
ALTER TABLE events_v7 RENAME TO events;
CREATE UNIQUE INDEX events_by_seq ON events (session_id, seq);
CREATE UNIQUE INDEX events_by_id ON events (session_id, id);
CREATE INDEX events_by_ctx ON events (session_id, ctx_pos) WHERE ctx_pos IS NOT NULL;
CREATE INDEX events_by_invocation ON events (session_id, invocation_id) WHERE invocation_id IS NOT NULL;
DELETE FROM sqlite_sequence WHERE name = 'events';
-- Rows deleted from the top under AUTOINCREMENT left the watermark above
-- the highest rowid: bring it down, as the trigger does from now on.
UPDATE fts_state SET indexed_through = (SELECT COALESCE(MAX(rowid), 0) FROM events)
    WHERE indexed_through > (SELECT COALESCE(MAX(rowid), 0) FROM events);
CREATE TRIGGER events_watermark_after_delete AFTER DELETE ON events
    WHEN old.rowid > (SELECT COALESCE(MAX(rowid), 0) FROM events)
BEGIN
    UPDATE fts_state SET indexed_through = (SELECT COALESCE(MAX(rowid), 0) FROM events)
        WHERE indexed_through > (SELECT COALESCE(MAX(rowid), 0) FROM events);
END;
