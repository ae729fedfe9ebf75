-- agent-session SQLite schema, version 2: the trigram index holds folded
-- text (case, accents and compatibility forms folded, see
-- session_core::fold_case). The old entries are dropped here; the
-- migration then re-indexes every event in the same transaction.
INSERT INTO events_fts (events_fts) VALUES ('delete-all');
UPDATE fts_state SET indexed_through = 0;

-- Sessions by metadata (written to run again safely): one row per top-level metadata entry, kept by
-- triggers. `value` holds the entry as SQLite reads it from JSON (text,
-- integer or real; booleans as 1/0) and `type` its JSON type, so a filter
-- matches "1", 1, 1.0 and true apart.
CREATE TABLE IF NOT EXISTS session_metadata (
    session_id TEXT NOT NULL,
    key        TEXT NOT NULL,
    type       TEXT NOT NULL,
    value,
    PRIMARY KEY (session_id, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS session_metadata_by_value ON session_metadata (key, type, value);
INSERT OR REPLACE INTO session_metadata (session_id, key, type, value)
    SELECT s.id, j.key, j.type, j.atom FROM sessions s, json_each(s.metadata) j
    WHERE json_valid(s.metadata);
CREATE TRIGGER IF NOT EXISTS sessions_metadata_insert AFTER INSERT ON sessions
    WHEN json_valid(new.metadata)
BEGIN
    INSERT OR REPLACE INTO session_metadata (session_id, key, type, value)
        SELECT new.id, j.key, j.type, j.atom FROM json_each(new.metadata) j;
END;
CREATE TRIGGER IF NOT EXISTS sessions_metadata_update AFTER UPDATE OF metadata ON sessions
BEGIN
    DELETE FROM session_metadata WHERE session_id = old.id;
    INSERT OR REPLACE INTO session_metadata (session_id, key, type, value)
        SELECT new.id, j.key, j.type, j.atom FROM json_each(new.metadata) j
        WHERE json_valid(new.metadata);
END;
CREATE TRIGGER IF NOT EXISTS sessions_metadata_delete AFTER DELETE ON sessions
BEGIN
    DELETE FROM session_metadata WHERE session_id = old.id;
END;
