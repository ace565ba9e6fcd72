-- build_context's scope (docs/context.md; mindfile.storage.recall.Scope.where): which
-- chunks a context may recall is a condition on the chunk's session, creation time,
-- expiry and pin (and, for the salience leg, its importance). Without an index holding
-- those columns, SQLite read every chunk row in scope from the table (text inline,
-- ~1.3 KB a chunk of chat): ~75 ms at 117k chunks for one user, twice a context (the
-- allowed rowids, the salient chunks). With this covering index it reads index
-- entries only: ~7 ms (benchmarks/README.md, "build_context at 117k chunks").
CREATE INDEX idx_chunks_scope ON chunks (session_id, created_at, expires_at, pinned, importance);
