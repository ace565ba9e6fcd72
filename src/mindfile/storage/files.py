"""SQL of file sync (table ``files``, migration 0012; docs/files.md), and the files
store (:class:`FilesStore`), which :mod:`mindfile.files.sync` writes through on either
backend (the Postgres twin: :mod:`mindfile.storage.postgres.files`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from mindfile.storage.chunks import ChunkRow, insert_chunks
from mindfile.storage.db import Database

__all__ = [
    "FilesStore",
    "SqliteFilesStore",
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


class FilesStore(Protocol):
    """The synced files of a store and their chunks (backend-neutral)."""

    def known(self, session_id: str) -> dict[str, tuple[int, str, int, int]]:
        """``path -> (id, content_hash, size, mtime_ns)`` of a root's indexed files."""
        ...

    def upsert(
        self,
        session_id: str,
        root: str,
        path: str,
        content_hash: str,
        size: int,
        mtime_ns: int,
        now: str,
    ) -> int:
        """Record a file (new, or its new content); returns its id."""
        ...

    def set_chunk_count(self, file_id: int, count: int) -> None:
        """How many chunks the file has now."""
        ...

    def clear_chunks(self, file_id: int) -> int:
        """Delete the file's chunks (not the file); returns how many."""
        ...

    def delete(self, file_id: int) -> int:
        """Delete a file and its chunks; returns the chunks removed."""
        ...

    def rename(self, file_id: int, path: str, size: int, mtime_ns: int) -> None:
        """A moved file: its new path, in the file row and its chunks' metadata."""
        ...

    def retouch(self, file_id: int, size: int, mtime_ns: int) -> None:
        """Same content, new modification time (the file is not read again)."""
        ...

    def vectors(self, file_id: int, model_id: str) -> dict[str, bytes]:
        """The file's chunks' vectors of ``model_id`` by text hash (little-endian
        float32 bytes): an edit re-embeds only new text."""
        ...

    def insert_chunks(
        self,
        rows: Sequence[ChunkRow],
        vectors: Sequence[npt.NDArray[np.floating] | None],
        model_id: str,
        now: str,
    ) -> list[int]:
        """Write chunk rows with their vectors (or embedding jobs); their row ids."""
        ...


class SqliteFilesStore:
    """:class:`FilesStore` on SQLite (the functions of this module)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def known(self, session_id: str) -> dict[str, tuple[int, str, int, int]]:
        return known_files(self.db, session_id)

    def upsert(
        self,
        session_id: str,
        root: str,
        path: str,
        content_hash: str,
        size: int,
        mtime_ns: int,
        now: str,
    ) -> int:
        return upsert_file(self.db, session_id, root, path, content_hash, size, mtime_ns, now)

    def set_chunk_count(self, file_id: int, count: int) -> None:
        set_chunk_count(self.db, file_id, count)

    def clear_chunks(self, file_id: int) -> int:
        return clear_chunks(self.db, file_id)

    def delete(self, file_id: int) -> int:
        return delete_file(self.db, file_id)

    def rename(self, file_id: int, path: str, size: int, mtime_ns: int) -> None:
        rename_file(self.db, file_id, path, size, mtime_ns)

    def retouch(self, file_id: int, size: int, mtime_ns: int) -> None:
        retouch_file(self.db, file_id, size, mtime_ns)

    def vectors(self, file_id: int, model_id: str) -> dict[str, bytes]:
        return file_vectors(self.db, file_id, model_id)

    def insert_chunks(
        self,
        rows: Sequence[ChunkRow],
        vectors: Sequence[npt.NDArray[np.floating] | None],
        model_id: str,
        now: str,
    ) -> list[int]:
        return insert_chunks(self.db, rows, vectors, model_id, now)
