-- agent-session PostgreSQL schema, version 1. __SCHEMA__ is the configured schema.
-- Timestamps are microseconds since the Unix epoch (UTC). JSON is stored as
-- text, not jsonb: jsonb rejects \u0000, and every Rust string must round-trip.

CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE __SCHEMA__.sessions (
    id             TEXT   PRIMARY KEY,
    app            TEXT   NOT NULL,
    user_id        TEXT   NOT NULL,
    key            TEXT,
    status         TEXT   NOT NULL,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL,
    expires_at     BIGINT,
    metadata       TEXT   NOT NULL,
    state          TEXT   NOT NULL,
    initial_state  TEXT   NOT NULL,
    event_count    BIGINT NOT NULL,
    context_tokens BIGINT NOT NULL,
    version        BIGINT NOT NULL,
    last_seq       BIGINT NOT NULL,
    next_ctx_pos   BIGINT NOT NULL
);
CREATE INDEX sessions_by_activity ON __SCHEMA__.sessions (updated_at DESC, id);
CREATE INDEX sessions_by_owner ON __SCHEMA__.sessions (app, user_id, updated_at DESC, id);
CREATE INDEX sessions_by_key ON __SCHEMA__.sessions (app, key, user_id, status, updated_at DESC);
CREATE INDEX sessions_by_expiry ON __SCHEMA__.sessions (expires_at) WHERE expires_at IS NOT NULL;

-- One row per archived event; ctx_pos is its place in the context (NULL = compacted out).
-- search_text is the message's search text, lower-cased in Rust (NUL as a space).
CREATE TABLE __SCHEMA__.events (
    session_id     TEXT    NOT NULL REFERENCES __SCHEMA__.sessions (id) ON DELETE CASCADE,
    seq            BIGINT  NOT NULL,
    id             TEXT    NOT NULL,
    ctx_pos        BIGINT,
    ts             BIGINT  NOT NULL,
    role           TEXT    NOT NULL,
    branch         TEXT,
    invocation_id  TEXT,
    synthetic      BOOLEAN NOT NULL,
    token_estimate BIGINT  NOT NULL,
    state_delta    TEXT,
    search_text    TEXT    NOT NULL,
    body           TEXT    NOT NULL,
    PRIMARY KEY (session_id, seq),
    UNIQUE (session_id, id)
);
CREATE INDEX events_by_ctx ON __SCHEMA__.events (session_id, ctx_pos) WHERE ctx_pos IS NOT NULL;
CREATE INDEX events_by_invocation ON __SCHEMA__.events (session_id, invocation_id) WHERE invocation_id IS NOT NULL;
CREATE INDEX events_search_trgm ON __SCHEMA__.events USING gin (search_text gin_trgm_ops);
CREATE INDEX events_search_fts ON __SCHEMA__.events USING gin (to_tsvector('simple', search_text));

CREATE TABLE __SCHEMA__.app_state (
    app   TEXT PRIMARY KEY,
    state TEXT NOT NULL
);

CREATE TABLE __SCHEMA__.user_state (
    app     TEXT NOT NULL,
    user_id TEXT NOT NULL,
    state   TEXT NOT NULL,
    PRIMARY KEY (app, user_id)
);
