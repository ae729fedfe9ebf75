-- agent-session PostgreSQL schema, version 2.
-- search_text now holds text folded for case, accents and compatibility
-- forms (session_core::fold_case); the migration re-folds the rows that
-- need it (non-ASCII text) in Rust after this script.
-- Sessions can be found by metadata key = value: a containment index.
CREATE INDEX sessions_by_metadata ON __SCHEMA__.sessions USING gin ((metadata::jsonb) jsonb_path_ops);
