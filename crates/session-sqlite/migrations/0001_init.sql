-- agent-session SQLite schema, version 1.
-- Timestamps are microseconds since the Unix epoch (UTC).

CREATE TABLE sessions (
    id             TEXT    PRIMARY KEY NOT NULL,
    app            TEXT    NOT NULL,
    user_id        TEXT    NOT NULL,
    key            TEXT,
    status         TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    expires_at     INTEGER,
    metadata       TEXT    NOT NULL,
    state          TEXT    NOT NULL,
    initial_state  TEXT    NOT NULL,
    event_count    INTEGER NOT NULL,
    context_tokens INTEGER NOT NULL,
    version        INTEGER NOT NULL,
    last_seq       INTEGER NOT NULL,
    next_ctx_pos   INTEGER NOT NULL
);
CREATE INDEX sessions_by_activity ON sessions (updated_at DESC, id);
CREATE INDEX sessions_by_owner ON sessions (app, user_id, updated_at DESC, id);
CREATE INDEX sessions_by_key ON sessions (app, key, user_id, status, updated_at DESC);
CREATE INDEX sessions_by_expiry ON sessions (expires_at) WHERE expires_at IS NOT NULL;

-- One row per archived event; ctx_pos is its place in the context (NULL = not in the context).
CREATE TABLE events (
    rowid          INTEGER PRIMARY KEY AUTOINCREMENT,
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
CREATE UNIQUE INDEX events_by_seq ON events (session_id, seq);
CREATE UNIQUE INDEX events_by_id ON events (session_id, id);
CREATE INDEX events_by_ctx ON events (session_id, ctx_pos) WHERE ctx_pos IS NOT NULL;
CREATE INDEX events_by_invocation ON events (session_id, invocation_id) WHERE invocation_id IS NOT NULL;

-- Trigram index of each event's search text (rowid = events.rowid). Events
-- are indexed in batches: rowids up to fts_state.indexed_through are in the
-- index; searches scan the (bounded) tail above it directly.
CREATE VIRTUAL TABLE events_fts USING fts5 (
    text,
    content = '',
    contentless_delete = 1,
    tokenize = 'trigram case_sensitive 0'
);

CREATE TABLE fts_state (
    id               INTEGER PRIMARY KEY CHECK (id = 1),
    indexed_through  INTEGER NOT NULL
);
INSERT INTO fts_state (id, indexed_through) VALUES (1, 0);

CREATE TABLE app_state (
    app   TEXT PRIMARY KEY NOT NULL,
    state TEXT NOT NULL
);

CREATE TABLE user_state (
    app     TEXT NOT NULL,
    user_id TEXT NOT NULL,
    state   TEXT NOT NULL,
    PRIMARY KEY (app, user_id)
);
