-- SQLite 0017: build_context's scope (session, creation time, expiry, pin, importance)
-- answered from one index instead of the chunk rows.
CREATE INDEX idx_chunks_scope ON chunks (session_id, created_at, expires_at, pinned, importance);
