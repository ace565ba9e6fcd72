-- Mindfile core schema: sessions, the conversation log, chunks and their indexes.
-- The seed's tables, with two deliberate changes:
--  * chunks has an explicit INTEGER PRIMARY KEY (id, AUTOINCREMENT so ids are never
--    reused) that FTS5 and the vector tables key on; chunk_id stays the public TEXT id.
--  * timestamps are ISO-8601 UTC text written by Mindfile (microsecond precision).
--  * chunks carry the text of the neighbouring events of their session
--    (context_before / context_after), indexed by FTS5 as low-weight columns: in a
--    conversation the answer is often the reply to the turn that names the topic.

CREATE TABLE sessions (
    session_id     TEXT PRIMARY KEY,
    agent_identity TEXT,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
);
CREATE INDEX idx_sessions_updated ON sessions (updated_at DESC);

CREATE TABLE conversation_events (
    session_id   TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    sequence     INTEGER NOT NULL,
    payload_json TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (session_id, sequence)
);

CREATE TABLE session_state (
    session_id TEXT PRIMARY KEY REFERENCES sessions (session_id) ON DELETE CASCADE,
    state_json TEXT NOT NULL DEFAULT '{}',
    updated_at TEXT NOT NULL
);

CREATE TABLE files (
    file_id       INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id    TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    source_uri    TEXT NOT NULL,
    content_hash  TEXT NOT NULL,
    metadata_json TEXT NOT NULL DEFAULT '{}',
    created_at    TEXT NOT NULL
);
CREATE INDEX idx_files_session ON files (session_id, source_uri);

CREATE TABLE chunks (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_id       TEXT NOT NULL UNIQUE,
    session_id     TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    chunk_text     TEXT NOT NULL,
    content_hash   TEXT NOT NULL,
    sequence_start INTEGER NOT NULL,
    sequence_end   INTEGER NOT NULL,
    metadata_json  TEXT NOT NULL DEFAULT '{}',
    created_at     TEXT NOT NULL,
    context_before TEXT NOT NULL DEFAULT '',
    context_after  TEXT NOT NULL DEFAULT '',
    UNIQUE (session_id, content_hash)
);
CREATE INDEX idx_chunks_session_seq ON chunks (session_id, sequence_end);

-- Vectors: little-endian float32, L2-normalised. The source of truth for every derived
-- vector index (in-memory exact, sqlite-vec, ...).
CREATE TABLE chunks_vec (
    chunk_rowid     INTEGER PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
    embedding_blob  BLOB NOT NULL,
    embedding_model TEXT NOT NULL
);

CREATE VIRTUAL TABLE chunks_fts USING fts5 (
    chunk_text,
    context_before,
    context_after,
    content = 'chunks',
    content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER chunks_fts_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, chunk_text, context_before, context_after)
    VALUES (new.id, new.chunk_text, new.context_before, new.context_after);
END;
CREATE TRIGGER chunks_fts_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, chunk_text, context_before, context_after)
    VALUES ('delete', old.id, old.chunk_text, old.context_before, old.context_after);
END;
CREATE TRIGGER chunks_fts_au AFTER UPDATE OF chunk_text, context_before, context_after ON chunks
BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, chunk_text, context_before, context_after)
    VALUES ('delete', old.id, old.chunk_text, old.context_before, old.context_after);
    INSERT INTO chunks_fts (rowid, chunk_text, context_before, context_after)
    VALUES (new.id, new.chunk_text, new.context_before, new.context_after);
END;

-- Store-wide settings: the embedding model id and dimensions the vectors were made with.
CREATE TABLE store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- Text changes to chunks (updates of indexed text, deletions), for derived lexical
-- indexes to catch up exactly. Insertions need no log: chunk ids only grow. Pruned by
-- the write path; a reader that fell behind the pruned range rebuilds.
CREATE TABLE chunks_changes (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_rowid INTEGER NOT NULL,
    op          TEXT NOT NULL CHECK (op IN ('u', 'd'))
);
CREATE TRIGGER chunks_changes_au AFTER UPDATE OF chunk_text, context_before, context_after
ON chunks BEGIN
    INSERT INTO chunks_changes (chunk_rowid, op) VALUES (old.id, 'u');
END;
CREATE TRIGGER chunks_changes_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_changes (chunk_rowid, op) VALUES (old.id, 'd');
END;
