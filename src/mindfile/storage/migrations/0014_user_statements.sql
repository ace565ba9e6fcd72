-- Preference recall (issue 14; docs/retrieval.md, "Preference recall"): whether a chunk
-- is a user-side statement about the user ("I've been learning Premiere Pro", written
-- by the user): 1 yes, 0 no, NULL not classified yet. Until now each process derived
-- the set by reading and classifying every chunk of the store in Python at its first
-- recommendation question (~30-45 us a chunk: seconds of CPU at 100k chunks, per
-- process).
--
-- A single store() classifies its chunks (~0.1 ms); bulk writes (store_many, notes,
-- file sync) leave them unclassified (classifying ~1 KB chat chunks cost ~14% of bulk
-- ingest throughput), to be classified once per store, off the write path, by a
-- background backfill (mindfile.retrieve.preferences.backfill: a writable
-- engine's thread, its idle follower, or the bulk ingest's publisher process), page by
-- page, each page's flags in one short transaction, only rows still NULL. A search
-- uses the flags known and classifies its own unclassified candidates. ADD COLUMN
-- rewrites nothing; the two indexes are partial: the statements (what the preference
-- leg reads), and the rows still unclassified. The FTS and change-log triggers fire on
-- chunk_text, context_before and context_after only, so writing the flag costs no
-- full-text work and no change-log row.
ALTER TABLE chunks ADD COLUMN user_statement INTEGER;
CREATE INDEX idx_chunks_user_statement ON chunks (id) WHERE user_statement = 1;
CREATE INDEX idx_chunks_unclassified ON chunks (id) WHERE user_statement IS NULL;
