//! What the migration tests share (each test file uses some of it).
#![allow(dead_code)]

/// Takes a database back from schema version 7 to 6: `events` keyed by
/// AUTOINCREMENT again (its counter set from the rows), without the
/// watermark trigger.
pub(crate) const UNDO_VERSION_7: &str = "DROP TRIGGER events_watermark_after_delete; \
     CREATE TABLE events_v6 (rowid INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, \
       seq INTEGER NOT NULL, id TEXT NOT NULL, ctx_pos INTEGER, timestamp INTEGER NOT NULL, \
       role TEXT NOT NULL, branch TEXT, invocation_id TEXT, synthetic INTEGER NOT NULL, \
       token_estimate INTEGER NOT NULL, state_delta TEXT, body TEXT NOT NULL); \
     INSERT INTO events_v6 SELECT * FROM events ORDER BY rowid; \
     DROP TABLE events; ALTER TABLE events_v6 RENAME TO events; \
     CREATE UNIQUE INDEX events_by_seq ON events (session_id, seq); \
     CREATE UNIQUE INDEX events_by_id ON events (session_id, id); \
     CREATE INDEX events_by_ctx ON events (session_id, ctx_pos) WHERE ctx_pos IS NOT NULL; \
     CREATE INDEX events_by_invocation ON events (session_id, invocation_id) \
       WHERE invocation_id IS NOT NULL; \
     DELETE FROM schema_version WHERE version >= 7;";

/// Takes a database back from schema version 6 to 5 (after [`UNDO_VERSION_7`]): the activity indexes
/// on `updated_at` again, without `active_at` and its triggers.
pub(crate) const UNDO_VERSION_6: &str = "DROP TRIGGER sessions_activity_insert; \
     DROP TRIGGER sessions_activity_update; \
     DROP INDEX sessions_by_activity; DROP INDEX sessions_by_owner; DROP INDEX sessions_by_key; \
     ALTER TABLE sessions DROP COLUMN active_at; \
     CREATE INDEX sessions_by_activity ON sessions (updated_at DESC, id); \
     CREATE INDEX sessions_by_owner ON sessions (app, user_id, updated_at DESC, id); \
     CREATE INDEX sessions_by_key ON sessions (app, key, user_id, status, updated_at DESC); \
     DELETE FROM schema_version WHERE version >= 6;";
