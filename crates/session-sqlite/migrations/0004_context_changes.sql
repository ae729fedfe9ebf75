-- agent-session SQLite schema, version 4.
-- The context's history: one row per context replace (its version, time,
-- the last seq before it and the new context as seq ranges, as JSON), from
-- which an archive read tells when each event left the context. Rows are
-- only inserted (never updated) and go with their session.
CREATE TABLE context_changes (
    session_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, version)
) WITHOUT ROWID;
