-- Neighbour smoothing (issue 14; docs/retrieval.md, "Neighbour smoothing"): every hybrid
-- search reads where its ~300 fused candidates sit in their conversations (session and
-- sequence_end, by chunk id). Through the table each lookup reads a row that holds its
-- ~1 KB chunk text: 0.95 ms a search at 117k chunks. This covering index answers the
-- same lookups from small index pages: 0.55 ms (the query names it with INDEXED BY:
-- the planner prefers the rowid). New chunks append at its right edge (ids grow).
CREATE INDEX idx_chunks_position ON chunks (id, session_id, sequence_end);
