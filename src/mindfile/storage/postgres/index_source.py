"""The Postgres :class:`~mindfile.storage.index_source.IndexSourceStore`: what the derived
indexes (Mindfile's BM25 index, the vector indexes) read to build and catch up.

The contract is SQLite's, and so is the way the indexes catch up: chunks above the
highest id they hold, and the change logs after the last seq they applied. That is only
sound if ids and seqs become visible in the order they were handed out, which identity
columns do not promise under concurrent writers. Migration ``0008_chunk_writer_lock.sql``
makes it so: one transaction at a time writes chunks or vectors (a transaction advisory
lock taken by statement triggers, :mod:`mindfile.storage.postgres.writer_lock`), and it
is visible before the next writer starts, so whatever a reader sees of the ids and seqs
is a prefix of all that will ever commit. Readers take no lock and never wait.

Two values SQLite reads from ``sqlite_sequence`` come from elsewhere here:

* :meth:`chunk_id_high`, the highest chunk id ever handed out (deleted ones too), is
  the identity sequence's last value. Unlike ``sqlite_sequence`` it also counts ids of
  inserts that rolled back or have not committed yet: an upper bound, which is how the
  indexes use it (a published index whose highest id is above it is from another store).
* a change log's newest seq is the highest seq in the log. Pruning keeps the newest row
  (:func:`mindfile.storage.postgres.sessions.prune_changes`), so that is the newest seq
  ever committed; the sequence's value would not do, as it may name a seq whose writer
  has not committed yet, and a reader that skipped past it would never see it.

Vectors are pgvector ``vector`` values. They are read as pgvector's binary form
(``vector_send``: a 4-byte header, then big-endian float32), joined into one buffer and
turned into a float32 matrix by numpy in one step, not converted row by row: a full load
of 20,000 256-d vectors took 0.28 s, against 1.7 s for pgvector's text form parsed per
row (the shared 2-core machine, loaded).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from mindfile.errors import StorageError
from mindfile.storage.index_source import STORE_ID_KEY, ChunkText, VectorRows
from mindfile.storage.meta import MODEL_KEY
from mindfile.storage.postgres.db import PgDatabase, Row

__all__ = ["PgIndexSourceStore", "vector_matrix"]

T = TypeVar("T")

CHUNK_MAX = "SELECT coalesce(max(id), 0) FROM chunks"

# NULL until the first id is handed out.
CHUNK_HIGH = (
    "SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('chunks', 'id')::regclass), 0)"
)

_CHUNK_COLUMNS = "SELECT id, session_id, chunk_text, context_before, context_after FROM chunks "

CHUNKS_AFTER = _CHUNK_COLUMNS + "WHERE id > %s ORDER BY id LIMIT %s"

CHUNKS_BY_IDS = _CHUNK_COLUMNS + "WHERE id = ANY(%s::bigint[])"

VECTOR_MAX = "SELECT coalesce(max(chunk_rowid), 0) FROM chunks_vec"

# min() and max() in subqueries of their own: each is one step down the primary key.
LOG_BOUNDS = "SELECT (SELECT max(seq) FROM {table}), (SELECT min(seq) FROM {table})"

LOG_ROWS = "SELECT {columns} FROM {table} WHERE seq > %s AND seq <= %s ORDER BY seq"

_VECTORS = (
    "SELECT v.chunk_rowid, vector_send(v.embedding), c.session_id{created} "
    "FROM chunks_vec AS v JOIN chunks AS c ON c.id = v.chunk_rowid "
)

VECTORS_AFTER = _VECTORS + "WHERE v.chunk_rowid > %s ORDER BY v.chunk_rowid{limit}"

VECTORS_BY_IDS = _VECTORS + "WHERE v.chunk_rowid = ANY(%s::bigint[]) ORDER BY v.chunk_rowid"

VECTORS_OF = (
    "SELECT chunk_rowid, vector_send(embedding) FROM chunks_vec "
    "WHERE chunk_rowid = ANY(%s::bigint[]) ORDER BY chunk_rowid"
)

META_GET = "SELECT value FROM store_meta WHERE key = %s"

# One statement that returns the id whoever made it: a second process making one at the
# same moment gets the first one's (the conflict updates nothing but returns the row).
META_MAKE = """
INSERT INTO store_meta (key, value) VALUES (%s, %s)
ON CONFLICT (key) DO UPDATE SET value = store_meta.value
RETURNING value
"""

#: Vectors per statement of a full load.
PAGE = 16_384

#: pgvector's binary form: int16 dimensions, int16 unused, then the floats.
_HEADER = 4


def vector_matrix(blobs: Sequence[bytes], dims: int) -> npt.NDArray[np.float32]:
    """pgvector binary values (``vector_send``) as one writable float32 matrix; a value
    of another size than ``dims`` is a :class:`~mindfile.errors.StorageError`."""
    if not blobs:
        return np.zeros((0, dims), dtype=np.float32)
    row = _HEADER + 4 * dims
    if any(len(b) != row for b in blobs):
        sizes = sorted({(len(b) - _HEADER) // 4 for b in blobs if len(b) != row})
        raise StorageError(
            f"stored vectors of {sizes[0]} dimensions where {dims} were asked for",
            dimensions=dims,
        )
    raw = np.frombuffer(b"".join(blobs), dtype=">f4").reshape(len(blobs), dims + 1)
    return raw[:, 1:].astype(np.float32)  # drops the header, native order, a copy


def _vector_rows(rows: Sequence[Row], dims: int, created: bool) -> VectorRows:
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = vector_matrix([r[1] for r in rows], dims)
    sessions = [str(r[2]) for r in rows]
    return VectorRows(ids, matrix, sessions, [str(r[3]) for r in rows] if created else None)


class PgIndexSourceStore:
    """:class:`~mindfile.storage.index_source.IndexSourceStore` on ``chunks``,
    ``chunks_vec``, their change logs and ``store_meta`` in Postgres."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    # -- chunks -------------------------------------------------------------------------

    def chunk_max_id(self) -> int:
        return int(self.db.scalar(CHUNK_MAX))

    def chunk_id_high(self) -> int:
        return int(self.db.scalar(CHUNK_HIGH) or 0)

    def chunks_after(self, after: int, limit: int) -> list[ChunkText]:
        rows: list[Any] = self.db.query(CHUNKS_AFTER, (int(after), int(limit)))
        return rows

    def chunks_by_ids(self, ids: Sequence[int]) -> list[ChunkText]:
        if not ids:
            return []
        rows: list[Any] = self.db.query(CHUNKS_BY_IDS, ([int(i) for i in ids],))
        return rows

    def text_changes_since(self, seen: int | None) -> tuple[int, list[tuple[int, str]] | None]:
        newest, rows = self._since("chunks_changes", seen, "chunk_rowid, op")
        if rows is None:
            return newest, None
        return newest, [(int(r[0]), str(r[1])) for r in rows]

    def text_change_bounds(self) -> tuple[int, int]:
        return self._bounds("chunks_changes")

    # -- vectors ------------------------------------------------------------------------

    def vector_max_id(self) -> int:
        return int(self.db.scalar(VECTOR_MAX))

    def vector_changes_since(self, seen: int | None) -> tuple[int, list[int] | None]:
        newest, rows = self._since("chunks_vec_changes", seen, "chunk_rowid")
        if rows is None:
            return newest, None
        return newest, list(dict.fromkeys(int(r[0]) for r in rows))

    def vectors_after(
        self, after: int, dims: int, limit: int | None = None, *, created: bool = False
    ) -> VectorRows:
        sql = VECTORS_AFTER.format(
            created=", c.created_at" if created else "",
            limit="" if limit is None else " LIMIT %s",
        )
        params: list[Any] = [int(after)] if limit is None else [int(after), int(limit)]
        return _vector_rows(self.db.query(sql, params), dims, created)

    def vectors_by_ids(self, ids: Sequence[int], dims: int, *, created: bool = False) -> VectorRows:
        if not ids:
            return _vector_rows([], dims, created)
        sql = VECTORS_BY_IDS.format(created=", c.created_at" if created else "")
        return _vector_rows(self.db.query(sql, ([int(i) for i in ids],)), dims, created)

    def vectors_of(
        self, ids: Sequence[int], dims: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        rows = self.db.query(VECTORS_OF, ([int(i) for i in ids],)) if ids else []
        found = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return found, vector_matrix([r[1] for r in rows], dims)

    def all_vectors(self, dims: int) -> VectorRows | None:
        # In pages, so the driver's row tuples never add up to a second copy of the matrix.
        pages: list[VectorRows] = []
        after = 0
        while True:
            page = self.vectors_after(after, dims, PAGE)
            if len(page.ids) == 0:
                break
            pages.append(page)
            after = int(page.ids[-1])
            if len(page.ids) < PAGE:
                break
        if not pages:
            return None
        if len(pages) == 1:
            return pages[0]
        return VectorRows(
            np.concatenate([p.ids for p in pages]),
            np.concatenate([p.matrix for p in pages]),
            [s for p in pages for s in p.sessions],
        )

    # -- identity -----------------------------------------------------------------------

    def store_id(self, *, create: bool = True) -> str | None:
        store = self.db.scalar(META_GET, (STORE_ID_KEY,))
        if store is None and create:
            made = uuid.uuid4().hex
            store = self._write(lambda: self.db.scalar(META_MAKE, (STORE_ID_KEY, made)))
        return None if store is None else str(store)

    def embedding_model(self) -> str | None:
        model = self.db.scalar(META_GET, (MODEL_KEY,))
        return None if model is None else str(model)

    # -- helpers ------------------------------------------------------------------------

    def _write(self, statement: Callable[[], T]) -> T:
        """Run a one-statement write, also from inside a read-only snapshot.

        The indexes ask for the store id under :meth:`PgDatabase.snapshot` at times (a
        ``REPEATABLE READ READ ONLY`` transaction, where SQLite would upgrade to a
        write). The statement then runs on another pooled connection, from a helper
        thread (threads do not share a connection), and commits on its own.
        """
        if not self.db.in_transaction or self.db.in_write_transaction:
            return statement()
        out: list[T] = []
        failed: list[BaseException] = []

        def run() -> None:
            try:
                out.append(statement())
            except BaseException as exc:  # re-raised in the caller's thread
                failed.append(exc)

        helper = threading.Thread(target=run, name="mindfile-store-id")
        helper.start()
        helper.join()
        if failed:
            raise failed[0]
        return out[0]

    def _bounds(self, table: str) -> tuple[int, int]:
        """``(oldest, newest)`` seq of a change log (``newest + 1`` when it is empty)."""
        row = self.db.query_one(LOG_BOUNDS.format(table=table))
        newest = 0 if row is None or row[0] is None else int(row[0])
        oldest = newest + 1 if row is None or row[1] is None else int(row[1])
        return oldest, newest

    def _since(self, table: str, seen: int | None, columns: str) -> tuple[int, list[Row] | None]:
        """The rules of :func:`mindfile.storage.changes.read_since`: no rows for
        ``seen=None``, None when the log was pruned past ``seen``."""
        oldest, newest = self._bounds(table)
        if seen is None or newest <= seen:
            return newest, []
        if seen < oldest - 1:
            return newest, None
        return newest, self.db.query(
            LOG_ROWS.format(columns=columns, table=table), (int(seen), newest)
        )
