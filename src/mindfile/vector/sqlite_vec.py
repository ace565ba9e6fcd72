"""A vector index in the same SQLite file, using the sqlite-vec ``vec0`` extension.

The ``vec0`` table (``chunks_vec_index``) is derived from ``chunks_vec`` and catches up
before each search, like the in-memory index; it persists between runs, so a cold open
does not reload every vector into memory. How far it has applied the
``chunks_vec_changes`` log is kept in ``store_meta`` next to it.
"""

from __future__ import annotations

import json
import threading

from mindfile.embed.base import Vector, to_blob
from mindfile.errors import BackendUnavailableError
from mindfile.storage.db import Database
from mindfile.vector.base import VectorFilter, changes_since, vector_max

__all__ = ["SqliteVecIndex"]

TABLE = "chunks_vec_index"
CHANGES_SEEN = "sqlite_vec_changes_seen"
SYNCED_MAX = "sqlite_vec_synced_max"

_INSERT_FROM_SOURCE = (
    f"INSERT INTO {TABLE} (rowid, embedding, session_id) "
    "SELECT v.chunk_rowid, v.embedding_blob, c.session_id "
    "FROM chunks_vec AS v JOIN chunks AS c ON c.id = v.chunk_rowid "
)
MAX_K = 4096  # sqlite-vec's limit on k


class SqliteVecIndex:
    """Exact KNN by sqlite-vec's ``vec0`` virtual table (cosine distance)."""

    name = "sqlite-vec"

    def __init__(self, db: Database, dims: int) -> None:
        try:
            import sqlite_vec
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise BackendUnavailableError("the sqlite-vec package is not installed") from exc
        self._db = db
        self._dims = dims
        self._lock = threading.Lock()
        db.load_extension("sqlite_vec", sqlite_vec.loadable_path())
        self._data_version: tuple[int, int] | None = None
        self._dirty = True
        self._ensure_table()

    def _ensure_table(self) -> None:
        with self._db.atomic():
            stored = self._db.scalar("SELECT value FROM store_meta WHERE key = 'sqlite_vec_dims'")
            if stored is not None and int(stored) != self._dims:
                self._db.execute(f"DROP TABLE IF EXISTS {TABLE}")
                self._db.execute(
                    "DELETE FROM store_meta WHERE key IN (?, ?)", (CHANGES_SEEN, SYNCED_MAX)
                )
            self._db.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING vec0("
                f"embedding float[{self._dims}] distance_metric=cosine, session_id text)"
            )
            self._db.execute(
                "INSERT OR REPLACE INTO store_meta (key, value) VALUES ('sqlite_vec_dims', ?)",
                (str(self._dims),),
            )

    def invalidate(self) -> None:
        self._dirty = True

    def purge(self) -> None:
        """Nothing to do: this index keeps no file outside the store."""

    def stats(self) -> dict[str, object]:
        return {"persisted": True, "table": TABLE}

    def rebuild(self) -> None:
        with self._db.lock, self._lock, self._db.atomic():
            self._db.execute(f"DELETE FROM {TABLE}")
            self._set_meta(SYNCED_MAX, 0)
            newest, _ = changes_since(self._db, None)
            self._set_changes_seen(newest)  # a full reload covers every logged change
            self._dirty = True
            self._catch_up()

    def _catch_up(self) -> None:
        if self._db.in_write_transaction:
            return  # serve the last committed state: uncommitted rows may roll back
        version = self._db.change_token()
        if not self._dirty and version == self._data_version:
            return
        if not self._behind():
            self._data_version = version
            self._dirty = False
            return
        # Re-read inside the write transaction: another process may be catching up the
        # same persistent table, and both must not insert the same new rows.
        with self._db.atomic():
            synced = self._synced_max()
            src_max = vector_max(self._db)
            if src_max > synced:
                self._db.execute(_INSERT_FROM_SOURCE + "WHERE v.chunk_rowid > ?", (synced,))
                self._set_meta(SYNCED_MAX, max(synced, src_max))
            self._apply_changes(synced)
        self._data_version = self._db.change_token()
        self._dirty = False

    def _behind(self) -> bool:
        """Whether the table misses something (read-only checks: no write lock)."""
        if vector_max(self._db) > self._synced_max():
            return True
        newest, _ = changes_since(self._db, None)
        return newest != self._changes_seen()

    def _synced_max(self) -> int:
        """The highest source id ever copied into the table (ids are never reused)."""
        value = self._db.scalar("SELECT value FROM store_meta WHERE key = ?", (SYNCED_MAX,))
        return int(value or 0)

    def _set_meta(self, key: str, value: int) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)", (key, str(value))
        )

    def _changes_seen(self) -> int:
        value = self._db.scalar("SELECT value FROM store_meta WHERE key = ?", (CHANGES_SEEN,))
        return int(value or 0)

    def _apply_changes(self, fresh_above: int) -> bool:
        """Re-read the ids logged in ``chunks_vec_changes`` since this table last did.

        Ids above ``fresh_above`` were just copied in this transaction: already current.
        """
        seen = self._changes_seen()
        newest, ids = changes_since(self._db, seen)
        if newest == seen:
            return False
        if ids is not None:
            ids = [i for i in ids if i <= fresh_above]
        if ids is None:  # the log was pruned past what this table saw: reload all
            self._db.execute(f"DELETE FROM {TABLE}")
            self._db.execute(_INSERT_FROM_SOURCE + "WHERE 1")
        elif ids:
            self._db.executemany(f"DELETE FROM {TABLE} WHERE rowid = ?", [(i,) for i in ids])
            self._db.execute(
                _INSERT_FROM_SOURCE + "WHERE v.chunk_rowid IN (SELECT value FROM json_each(?))",
                (json.dumps(ids),),
            )
        self._set_changes_seen(newest)
        return True

    def _set_changes_seen(self, seq: int) -> None:
        self._set_meta(CHANGES_SEEN, seq)

    def size(self) -> int:
        # Lock order: the database's lock before this index's (all of its work is SQL).
        with self._db.lock, self._lock:
            self._catch_up()
            return int(self._db.scalar(f"SELECT count(*) FROM {TABLE}"))

    def search(
        self, query: Vector, k: int, *, where: VectorFilter | None = None
    ) -> list[tuple[int, float]]:
        with self._db.lock, self._lock:
            self._catch_up()
            if k <= 0:
                return []
            sql = f"SELECT rowid, distance FROM {TABLE} WHERE embedding MATCH ? AND k = ?"
            params: list[object] = [to_blob(query), min(k, MAX_K)]
            if where is not None and where.session_ids is not None:
                if not where.session_ids:
                    return []
                sql += f" AND session_id IN ({','.join('?' * len(where.session_ids))})"
                params.extend(where.session_ids)
            if where is not None and where.rowids is not None:
                sql += " AND rowid IN (SELECT value FROM json_each(?))"
                params.append(json.dumps([int(r) for r in where.rowids]))
            sql += " ORDER BY distance"
            rows = self._db.query(sql, params)
        # A zero vector (an embedder's answer for text without a known token, e.g. an
        # emoji) has no cosine distance: sqlite-vec gives NULL and sorts it first. Score
        # it 0.0 as the exact index does. It still takes one of the k slots.
        hits = [(int(r), 0.0 if d is None else 1.0 - float(d)) for r, d in rows]
        hits.sort(key=lambda h: -h[1])
        return hits

    def close(self) -> None:
        self._data_version = None
