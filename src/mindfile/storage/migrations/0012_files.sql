-- File sync (issue 9; docs/files.md): the files indexed from synced folders. Each root
-- folder is one session (files:<hash of the root>); a file row remembers what was
-- indexed (content hash, size, modification time) so an unchanged file is never read
-- again. Deleting the session (forget) deletes its files; deleting a file deletes its
-- chunks (and through them their vectors and full-text rows).
--
-- 0001 created a placeholder `files` table (the seed's first draft: source_uri,
-- metadata) that no Mindfile version ever wrote; it is replaced by the columns the
-- seed's file index needs (path, content hash, size, modification time, chunk count).
DROP INDEX IF EXISTS idx_files_session;
DROP TABLE files;

CREATE TABLE files (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    root TEXT NOT NULL,
    path TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    chunk_count INTEGER NOT NULL DEFAULT 0,
    indexed_at TEXT NOT NULL,
    UNIQUE (session_id, path)
);

CREATE INDEX files_by_hash ON files (session_id, content_hash);

ALTER TABLE chunks ADD COLUMN file_id INTEGER REFERENCES files (id) ON DELETE CASCADE;

CREATE INDEX chunks_by_file ON chunks (file_id) WHERE file_id IS NOT NULL;
