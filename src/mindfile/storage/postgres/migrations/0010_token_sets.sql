-- Token match: each chunk's set of word pieces (SQLite 0016, which explains it), NULL
-- until the background backfill or a search computes it. The writer lock (0008) and the
-- change-log trigger (0001) fire on other columns only, so writing a set takes no lock
-- and logs no change.
ALTER TABLE chunks ADD COLUMN token_set bytea;
CREATE INDEX idx_chunks_untokenized ON chunks (id) WHERE token_set IS NULL;
