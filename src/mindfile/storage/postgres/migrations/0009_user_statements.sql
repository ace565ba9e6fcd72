-- Preference recall: whether a chunk is a user-side statement about the user (SQLite
-- 0014, which explains it): 1 yes, 0 no, NULL not classified yet (chunks are written
-- unclassified; a background backfill classifies them once per store). The writer
-- lock (0008) and the change-log trigger (0001) fire on other columns only, so writing
-- the flag takes no lock and logs no change.
ALTER TABLE chunks ADD COLUMN user_statement integer;
CREATE INDEX idx_chunks_user_statement ON chunks (id) WHERE user_statement = 1;
CREATE INDEX idx_chunks_unclassified ON chunks (id) WHERE user_statement IS NULL;
