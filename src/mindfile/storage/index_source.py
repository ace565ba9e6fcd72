"""The index source: what the derived indexes read from the store.

The BM25 index (:mod:`mindfile.retrieve.lexical`) and the vector indexes
(:mod:`mindfile.vector`) are derived from ``chunks`` and ``chunks_vec`` and catch up
from them: rows after the highest id they hold, rows by id (what the change logs name),
the change logs since a sequence (:mod:`mindfile.storage.changes`), and the store's id,
which their published files record. This store is those reads, with plain values and
numpy arrays in and out.

Locking stays the caller's: an index takes :attr:`Database.lock` (and, where it needs
one consistent view, :meth:`Database.snapshot`) around several reads, and each method
here runs inside it; a method takes no lock of its own beyond the statement's (lock
order: the database's before the index's, docs/architecture.md, "Concurrency").

Like :mod:`mindfile.storage.search`, it is not in :class:`~mindfile.storage.stores.Stores`:
the indexes are built over the :class:`Database` they are given, and build their source
with :func:`index_source`.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
import numpy.typing as npt

from mindfile.storage.changes import bounds, read_since
from mindfile.storage.db import Database
from mindfile.storage.meta import MODEL_KEY

if TYPE_CHECKING:
    from mindfile.storage.postgres.db import PgDatabase

__all__ = [
    "STORE_ID_KEY",
    "ChunkText",
    "IndexSourceStore",
    "SqliteIndexSourceStore",
    "VectorRows",
    "blob_matrix",
    "index_source",
]

#: ``store_meta`` key of the store's id, which manifests of derived indexes record so an
#: index folder never serves another store (a file replaced or restored from a backup).
STORE_ID_KEY = "ann_store_id"

#: A chunk as the BM25 index reads it: ``(id, session_id, chunk_text, context_before,
#: context_after)``.
ChunkText = tuple[int, str, str, str, str]


@dataclass(frozen=True, slots=True)
class VectorRows:
    """A batch read from ``chunks_vec``: ids ascending, float32 matrix, session ids, and
    (when asked for) each chunk's ``created_at`` text."""

    ids: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]
    sessions: list[str]
    created: list[str] | None = None


class IndexSourceStore(Protocol):
    """The derived indexes' reads (backend-neutral). Ids only grow (AUTOINCREMENT)."""

    # -- chunks (the BM25 index) -------------------------------------------------------

    def chunk_max_id(self) -> int:
        """The highest chunk id present (0 when none): the cheap check of every search."""
        ...

    def chunk_id_high(self) -> int:
        """The highest chunk id ever assigned (deleted ones too; 0 when none)."""
        ...

    def chunks_after(self, after: int, limit: int) -> list[ChunkText]:
        """Up to ``limit`` chunks with ``id > after``, in id order."""
        ...

    def chunks_by_ids(self, ids: Sequence[int]) -> list[ChunkText]:
        """The chunks of ``ids`` that exist (any order)."""
        ...

    def text_changes_since(self, seen: int | None) -> tuple[int, list[tuple[int, str]] | None]:
        """``(newest_seq, [(chunk_id, op), ...])`` logged in ``chunks_changes`` after
        ``seen``, oldest first (``op``: ``"u"`` updated text, ``"d"`` deleted). No rows
        for ``seen=None``; None when the log was pruned past ``seen`` (rebuild)."""
        ...

    def text_change_bounds(self) -> tuple[int, int]:
        """``(oldest, newest)`` seq of ``chunks_changes`` (:func:`changes.bounds`)."""
        ...

    # -- vectors ------------------------------------------------------------------------

    def vector_max_id(self) -> int:
        """The highest chunk id that has a vector (0 when none)."""
        ...

    def vector_changes_since(self, seen: int | None) -> tuple[int, list[int] | None]:
        """``(newest_seq, chunk_ids)`` of vectors changed after ``seen`` (each id once,
        in log order); no ids for ``seen=None``, None when the log was pruned past it."""
        ...

    def vectors_after(
        self, after: int, dims: int, limit: int | None = None, *, created: bool = False
    ) -> VectorRows:
        """Vectors with ``chunk_rowid > after`` in id order (at most ``limit``), with
        their chunks' session ids (and ``created_at`` when ``created``)."""
        ...

    def vectors_by_ids(self, ids: Sequence[int], dims: int, *, created: bool = False) -> VectorRows:
        """The vectors of ``ids`` that exist, in id order (as :meth:`vectors_after`)."""
        ...

    def vectors_of(
        self, ids: Sequence[int], dims: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """``(ids, matrix)`` of those of ``ids`` that have a vector, in id order: the
        vectors alone, without their chunks' columns (one table read, no join: an ANN
        index rescoring its candidates reads ~k rows a search)."""
        ...

    def all_vectors(self, dims: int) -> VectorRows | None:
        """Every vector with its session id, in id order (a full load, the fastest way
        the backend has); None when there are none."""
        ...

    # -- identity -----------------------------------------------------------------------

    def store_id(self, *, create: bool = True) -> str | None:
        """The store's id (made on first use, one small write); None when it has none
        and ``create`` is False (a read-only store)."""
        ...

    def embedding_model(self) -> str | None:
        """The model the store's vectors are bound to, if any."""
        ...


def blob_matrix(blobs: Sequence[bytes], dims: int) -> npt.NDArray[np.float32]:
    """Stored vectors (little-endian float32 blobs) as one writable float32 matrix."""
    if not blobs:
        return np.zeros((0, dims), dtype=np.float32)
    matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(-1, dims)
    return matrix.astype(np.float32, copy=True)


CHUNK_MAX = "SELECT coalesce(max(id), 0) FROM chunks"

CHUNK_HIGH = "SELECT seq FROM sqlite_sequence WHERE name = 'chunks'"

_CHUNK_COLUMNS = "SELECT id, session_id, chunk_text, context_before, context_after FROM chunks "

CHUNKS_AFTER = _CHUNK_COLUMNS + "WHERE id > ? ORDER BY id LIMIT ?"

CHUNKS_BY_IDS = _CHUNK_COLUMNS + "WHERE id IN (SELECT value FROM json_each(?))"

VECTOR_MAX = "SELECT coalesce(max(chunk_rowid), 0) FROM chunks_vec"

_VECTORS = (
    "SELECT v.chunk_rowid, v.embedding_blob, c.session_id FROM chunks_vec AS v "
    "JOIN chunks AS c ON c.id = v.chunk_rowid "
)

_VECTORS_CREATED = (
    "SELECT v.chunk_rowid, v.embedding_blob, c.session_id, c.created_at "
    "FROM chunks_vec AS v JOIN chunks AS c ON c.id = v.chunk_rowid "
)

_AFTER = "WHERE v.chunk_rowid > ? ORDER BY v.chunk_rowid"

_BY_IDS = "WHERE v.chunk_rowid IN (SELECT value FROM json_each(?)) ORDER BY v.chunk_rowid"

VECTORS_OF = (
    "SELECT chunk_rowid, embedding_blob FROM chunks_vec "
    "WHERE chunk_rowid IN (SELECT value FROM json_each(?)) ORDER BY chunk_rowid"
)

# The full load reads chunks_vec alone (no row-by-row join with chunks, whose pages hold
# the text) and the sessions from a covering index scan: ~2x faster after a cold open.
VECTOR_PAGE = (
    "SELECT chunk_rowid, embedding_blob FROM chunks_vec WHERE chunk_rowid > ? "
    "ORDER BY chunk_rowid LIMIT ?"
)

OWNERS = "SELECT id, session_id FROM chunks ORDER BY session_id"

META_GET = "SELECT value FROM store_meta WHERE key = ?"

META_ADD = "INSERT OR IGNORE INTO store_meta (key, value) VALUES (?, ?)"

#: Vectors per statement of a full load.
PAGE = 16_384


class SqliteIndexSourceStore:
    """:class:`IndexSourceStore` on ``chunks``, ``chunks_vec``, their change logs and
    ``store_meta``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def chunk_max_id(self) -> int:
        return int(self.db.scalar(CHUNK_MAX))

    def chunk_id_high(self) -> int:
        return int(self.db.scalar(CHUNK_HIGH) or 0)

    def chunks_after(self, after: int, limit: int) -> list[ChunkText]:
        rows: list[Any] = self.db.query(CHUNKS_AFTER, (after, limit))
        return rows

    def chunks_by_ids(self, ids: Sequence[int]) -> list[ChunkText]:
        rows: list[Any] = self.db.query(CHUNKS_BY_IDS, (f"[{','.join(map(str, ids))}]",))
        return rows

    def text_changes_since(self, seen: int | None) -> tuple[int, list[tuple[int, str]] | None]:
        newest, rows = read_since(self.db, "chunks_changes", seen, "chunk_rowid, op")
        logged: list[Any] | None = rows
        return newest, logged

    def text_change_bounds(self) -> tuple[int, int]:
        return bounds(self.db, "chunks_changes")

    def vector_max_id(self) -> int:
        return int(self.db.scalar(VECTOR_MAX))

    def vector_changes_since(self, seen: int | None) -> tuple[int, list[int] | None]:
        newest, rows = read_since(self.db, "chunks_vec_changes", seen)
        if rows is None:
            return newest, None
        return newest, list(dict.fromkeys(int(r[0]) for r in rows))

    def vectors_after(
        self, after: int, dims: int, limit: int | None = None, *, created: bool = False
    ) -> VectorRows:
        sql = (_VECTORS_CREATED if created else _VECTORS) + _AFTER
        params: list[Any] = [after]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return _vector_rows(self.db.query(sql, params), dims, created)

    def vectors_by_ids(self, ids: Sequence[int], dims: int, *, created: bool = False) -> VectorRows:
        if not ids:
            return _vector_rows([], dims, created)
        sql = (_VECTORS_CREATED if created else _VECTORS) + _BY_IDS
        rows = self.db.query(sql, (json.dumps([int(r) for r in ids]),))
        return _vector_rows(rows, dims, created)

    def vectors_of(
        self, ids: Sequence[int], dims: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        if not ids:
            return np.zeros(0, dtype=np.int64), blob_matrix([], dims)
        rows = self.db.query(VECTORS_OF, (json.dumps([int(r) for r in ids]),))
        found = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return found, blob_matrix([r[1] for r in rows], dims)

    def all_vectors(self, dims: int) -> VectorRows | None:
        # Read in pages, so the per-row blobs (freed to the C heap, which keeps them)
        # never add up to a second copy of the matrix.
        id_pages: list[npt.NDArray[np.int64]] = []
        pages: list[npt.NDArray[np.float32]] = []
        after = 0
        while True:
            rows = self.db.query(VECTOR_PAGE, (after, PAGE))
            if not rows:
                break
            id_pages.append(np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)))
            pages.append(np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(-1, dims))
            after = int(id_pages[-1][-1])
            if len(rows) < PAGE:
                break
        if not pages:
            return None
        ids = np.concatenate(id_pages)
        matrix = np.concatenate(pages).astype(np.float32, copy=False)
        del pages
        owners = self.db.query(OWNERS)
        chunk_ids = np.fromiter((r[0] for r in owners), dtype=np.int64, count=len(owners))
        order = np.argsort(chunk_ids)
        at = np.searchsorted(chunk_ids[order], ids)
        if len(owners) == 0 or np.any(at >= len(owners)) or np.any(chunk_ids[order][at] != ids):
            return self.vectors_after(0, dims)  # a vector without its chunk: the joined read
        names = [owners[int(i)][1] for i in order[at]]
        return VectorRows(ids, matrix, names)

    def store_id(self, *, create: bool = True) -> str | None:
        store = self.db.scalar(META_GET, (STORE_ID_KEY,))
        if store is None and create:
            with self.db.atomic():
                self.db.execute(META_ADD, (STORE_ID_KEY, uuid.uuid4().hex))
                store = self.db.scalar(META_GET, (STORE_ID_KEY,))
        return None if store is None else str(store)

    def embedding_model(self) -> str | None:
        model = self.db.scalar(META_GET, (MODEL_KEY,))
        return None if model is None else str(model)


def _vector_rows(rows: Sequence[Sequence[Any]], dims: int, created: bool) -> VectorRows:
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = blob_matrix([r[1] for r in rows], dims)
    sessions = [str(r[2]) for r in rows] if created else [r[2] for r in rows]
    return VectorRows(ids, matrix, sessions, [r[3] for r in rows] if created else None)


def index_source(db: Database | PgDatabase) -> IndexSourceStore:
    """The index source over ``db``: the Postgres one for a ``PgDatabase``, else SQLite's.

    The Postgres module is imported only for a Postgres database. A ``PgDatabase`` can
    only exist once its module is loaded, so looking in ``sys.modules`` decides without
    importing psycopg (the core install has none)."""
    pg = sys.modules.get("mindfile.storage.postgres.db")
    if pg is not None and isinstance(db, pg.PgDatabase):
        from mindfile.storage.postgres.index_source import PgIndexSourceStore

        return PgIndexSourceStore(db)
    return SqliteIndexSourceStore(cast(Database, db))
