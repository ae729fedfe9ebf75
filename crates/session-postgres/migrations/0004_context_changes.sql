-- agent-session PostgreSQL schema, version 4.
-- The context's history: one row per context replace (its version, time,
-- the last seq before it and the new context as seq ranges, as JSON), from
-- which an archive read tells when each event left the context. Rows are
-- only inserted (never updated) and go with their session.
CREATE TABLE IF NOT EXISTS __SCHEMA__.context_changes (
    session_id TEXT   NOT NULL REFERENCES __SCHEMA__.sessions (id) ON DELETE CASCADE,
    version    BIGINT NOT NULL,
    body       TEXT   NOT NULL,
    PRIMARY KEY (session_id, version)
);
