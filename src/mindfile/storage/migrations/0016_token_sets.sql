-- Token match (issue 14; docs/retrieval.md, "Token match"): each chunk's set of word
-- pieces (the bundled model's WordPiece ids, sorted, unique, little-endian uint16),
-- NULL until computed. A search reranks its best fused candidates by how closely each
-- query word piece matches some word piece of the chunk in the bundled model's token
-- space; it reads the sets of those candidates here instead of tokenising their text
-- (~40 us a 640-character chunk).
--
-- Like the preference flag (0014), the sets are made off the write path by a
-- background backfill (mindfile.retrieve.token_match.backfill: the searching process's
-- thread or its idle follower), page by page, in short transactions, only rows still
-- NULL; a search tokenises its own candidates that have none yet. Chunk text never
-- changes, so a set, once written, stays right. The FTS and change-log triggers fire on
-- other columns: writing a set costs no full-text work and no change-log row. The
-- partial index holds the chunks still without a set (the backfill's pages).
ALTER TABLE chunks ADD COLUMN token_set BLOB;
CREATE INDEX idx_chunks_untokenized ON chunks (id) WHERE token_set IS NULL;
