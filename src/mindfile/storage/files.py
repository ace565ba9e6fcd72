"""SQL of file sync (table ``files``, migration 0012; docs/files.md)."""

from __future__ import annotations

from mindfile.storage.db import Database

__all__ = [
    "clear_chunks",
    "delete_file",
    "file_vectors",
    "known_files",
    "rename_file",
    "retouch_file",
    "set_chunk_count",
    "upsert_file",
]

KNOWN = """
SELECT path, id, content_hash, size, mtime_ns FROM files WHERE session_id = ?
"""

UPSERT = """
INSERT INTO files (session_id, root, path, content_hash, size, mtime_ns, chunk_count,
                   indexed_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7)
ON CONFLICT (session_id, path) DO UPDATE SET
    content_hash = excluded.content_hash, size = excluded.size,
    mtime_ns = excluded.mtime_ns, indexed_at = excluded.indexed_at
RETURNING id
"""

# Vectors of a file's current chunks by text hash (an edit re-embeds only new text).
FILE_VECTORS = """
SELECT c.text_hash, v.embedding_blob FROM chunks AS c
JOIN chunks_vec AS v ON v.chunk_rowid = c.id
WHERE c.file_id = ? AND v.embedding_model = ? AND c.text_hash IS NOT NULL
"""

RENAME_CHUNKS = """
UPDATE chunks SET metadata_json = json_set(metadata_json, '$.path', ?2) WHERE file_id = ?1
"""


def known_files(db: Database, session_id: str) -> dict[str, tuple[int, str, int, int]]:
    """``path -> (id, content_hash, size, mtime_ns)`` of a root's indexed files."""
    return {
        str(p): (int(i), str(h), int(s), int(m)) for p, i, h, s, m in db.query(KNOWN, (session_id,))
    }


def upsert_file(
    db: Database,
    session_id: str,
    root: str,
    path: str,
    content_hash: str,
    size: int,
    mtime_ns: int,
    now: str,
) -> int:
    return int(db.scalar(UPSERT, (session_id, root, path, content_hash, size, mtime_ns, now)))


def set_chunk_count(db: Database, file_id: int, count: int) -> None:
    db.execute("UPDATE files SET chunk_count = ? WHERE id = ?", (count, file_id))


def clear_chunks(db: Database, file_id: int) -> int:
    db.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,))
    return db.changes()


def delete_file(db: Database, file_id: int) -> int:
    """Delete a file and (by cascade) its chunks; returns the chunks removed."""
    removed = int(db.scalar("SELECT count(*) FROM chunks WHERE file_id = ?", (file_id,)))
    db.execute("DELETE FROM files WHERE id = ?", (file_id,))
    return removed


def rename_file(db: Database, file_id: int, path: str, size: int, mtime_ns: int) -> None:
    db.execute(
        "UPDATE files SET path = ?, size = ?, mtime_ns = ? WHERE id = ?",
        (path, size, mtime_ns, file_id),
    )
    db.execute(RENAME_CHUNKS, (file_id, path))


def retouch_file(db: Database, file_id: int, size: int, mtime_ns: int) -> None:
    """Same content, new modification time: remember it so the file is not read again."""
    db.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE id = ?", (size, mtime_ns, file_id))


def file_vectors(db: Database, file_id: int, model_id: str) -> dict[str, bytes]:
    return {str(h): bytes(b) for h, b in db.query(FILE_VECTORS, (file_id, model_id))}
