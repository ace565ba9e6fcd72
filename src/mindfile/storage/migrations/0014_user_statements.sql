-- Preference recall (issue 14; docs/retrieval.md, "Preference recall"): whether a chunk
-- is a user-side statement about the user ("I've been learning Premiere Pro", written
-- by the user). The write path classifies every chunk before its write transaction
-- (mindfile.index.statements) and stores the answer here: 1 yes, 0 no. Until now each
-- process derived the set by reading and classifying every chunk of the store in
-- Python at its first recommendation question (~30-45 us a chunk: seconds of CPU at
-- 100k chunks, per process).
--
-- NULL means "not classified yet": every row written before this migration. The first
-- recommendation question of a writable engine starts a background backfill that
-- classifies them page by page (each page's flags in one short transaction, only rows
-- still NULL), once for every process; until it finishes, searches boost only the
-- statements among their own candidates. ADD COLUMN rewrites nothing; the two indexes
-- are partial: the statements (what the preference leg reads), and the rows still
-- unclassified (empty once the backfill is done). The FTS and change-log triggers fire
-- on chunk_text, context_before and context_after only, so writing the flag costs no
-- full-text work and no change-log row.
ALTER TABLE chunks ADD COLUMN user_statement INTEGER;
CREATE INDEX idx_chunks_user_statement ON chunks (id) WHERE user_statement = 1;
CREATE INDEX idx_chunks_unclassified ON chunks (id) WHERE user_statement IS NULL;
