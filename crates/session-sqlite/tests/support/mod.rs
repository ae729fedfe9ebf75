//! What the migration tests share.

/// Takes a database back from schema version 6 to 5: the activity indexes
/// on `updated_at` again, without `active_at` and its triggers.
pub(crate) const UNDO_VERSION_6: &str = "DROP TRIGGER sessions_activity_insert; \
     DROP TRIGGER sessions_activity_update; \
     DROP INDEX sessions_by_activity; DROP INDEX sessions_by_owner; DROP INDEX sessions_by_key; \
     ALTER TABLE sessions DROP COLUMN active_at; \
     CREATE INDEX sessions_by_activity ON sessions (updated_at DESC, id); \
     CREATE INDEX sessions_by_owner ON sessions (app, user_id, updated_at DESC, id); \
     CREATE INDEX sessions_by_key ON sessions (app, key, user_id, status, updated_at DESC); \
     DELETE FROM schema_version WHERE version >= 6;";
