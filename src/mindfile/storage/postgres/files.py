"""The files store (:class:`~mindfile.storage.files.FilesStore`) on Postgres: what file
sync (:mod:`mindfile.files.sync`) writes, same contract as the SQLite one.

A renamed file's chunks get their new ``path`` in ``metadata_json`` through ``jsonb``
(``jsonb_set``): the stored text is then jsonb's rendering of the document (same keys
and values, its own key order and spacing); readers parse it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from mindfile.storage.chunks import ChunkRow
from mindfile.storage.postgres.db import PgDatabase
from mindfile.storage.postgres.sessions import insert_chunks

__all__ = ["PgFilesStore"]

KNOWN = "SELECT path, id, content_hash, size, mtime_ns FROM files WHERE session_id = %s"

UPSERT = """
INSERT INTO files (session_id, root, path, content_hash, size, mtime_ns, chunk_count,
                   indexed_at)
VALUES (%(session)s, %(root)s, %(path)s, %(hash)s, %(size)s, %(mtime)s, 0, %(now)s)
ON CONFLICT (session_id, path) DO UPDATE SET
    content_hash = excluded.content_hash, size = excluded.size,
    mtime_ns = excluded.mtime_ns, indexed_at = excluded.indexed_at
RETURNING id
"""

FILE_VECTORS = """
SELECT c.text_hash, v.embedding FROM chunks AS c
JOIN chunks_vec AS v ON v.chunk_rowid = c.id
WHERE c.file_id = %s AND v.embedding_model = %s AND c.text_hash IS NOT NULL
"""

RENAME = "UPDATE files SET path = %s, size = %s, mtime_ns = %s WHERE id = %s"

RENAME_CHUNKS = """
UPDATE chunks
SET metadata_json = jsonb_set(metadata_json::jsonb, '{path}', to_jsonb(%s::text))::text
WHERE file_id = %s
"""


def _blob(value: object) -> bytes:
    to_numpy = getattr(value, "to_numpy", None)
    raw = to_numpy() if callable(to_numpy) else value
    return np.asarray(raw, dtype="<f4").tobytes()


class PgFilesStore:
    """:class:`~mindfile.storage.files.FilesStore` on Postgres."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def known(self, session_id: str) -> dict[str, tuple[int, str, int, int]]:
        rows = self.db.query(KNOWN, (session_id,))
        return {str(p): (int(i), str(h), int(s), int(m)) for p, i, h, s, m in rows}

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
        params = {
            "session": session_id, "root": root, "path": path, "hash": content_hash,
            "size": size, "mtime": mtime_ns, "now": now,
        }  # fmt: skip
        return int(self.db.scalar(UPSERT, params))

    def set_chunk_count(self, file_id: int, count: int) -> None:
        self.db.execute("UPDATE files SET chunk_count = %s WHERE id = %s", (count, file_id))

    def clear_chunks(self, file_id: int) -> int:
        self.db.execute("DELETE FROM chunks WHERE file_id = %s", (file_id,))
        return self.db.changes()

    def delete(self, file_id: int) -> int:
        removed = int(self.db.scalar("SELECT count(*) FROM chunks WHERE file_id = %s", (file_id,)))
        self.db.execute("DELETE FROM files WHERE id = %s", (file_id,))
        return removed

    def rename(self, file_id: int, path: str, size: int, mtime_ns: int) -> None:
        self.db.execute(RENAME, (path, size, mtime_ns, file_id))
        self.db.execute(RENAME_CHUNKS, (path, file_id))

    def retouch(self, file_id: int, size: int, mtime_ns: int) -> None:
        self.db.execute(
            "UPDATE files SET size = %s, mtime_ns = %s WHERE id = %s", (size, mtime_ns, file_id)
        )

    def vectors(self, file_id: int, model_id: str) -> dict[str, bytes]:
        rows = self.db.query(FILE_VECTORS, (file_id, model_id))
        return {str(h): _blob(v) for h, v in rows}

    def insert_chunks(
        self,
        rows: Sequence[ChunkRow],
        vectors: Sequence[npt.NDArray[np.floating] | None],
        model_id: str,
        now: str,
    ) -> list[int]:
        return insert_chunks(self.db, rows, vectors, model_id, now)
