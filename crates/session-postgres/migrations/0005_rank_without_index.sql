-- agent-session PostgreSQL schema, version 5.
-- No full-text index on search_text: no query filtered through it (search
-- filters with the trigram index and ranks its candidates with ts_rank),
-- and a tsvector is limited to 1 MB, so an event whose text holds many
-- distinct words (a large tool output, or sealed text) could not be
-- stored while the index existed.
DROP INDEX IF EXISTS __SCHEMA__.events_search_fts;
