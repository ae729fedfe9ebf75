-- agent-session SQLite schema, version 3.
-- The context is the events whose ctx_pos is at least the session's
-- ctx_base. A context replace gives the events it keeps positions above
-- every earlier one and moves ctx_base to the first of them, so the rows of
-- the events that leave the context stay untouched (rewriting each of them,
-- body and all, was most of a compaction's write).
-- 0 keeps every row with a position in the context, as before.
ALTER TABLE sessions ADD COLUMN ctx_base INTEGER NOT NULL DEFAULT 0;
