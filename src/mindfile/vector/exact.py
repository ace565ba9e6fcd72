"""The default vector index: exact cosine search over an in-memory numpy matrix.

It mirrors ``chunks_vec``. Catching up is incremental: chunk ids only grow
(AUTOINCREMENT), so new vectors are those above the highest id held; vectors that
arrived out of id order, were rewritten or were deleted are re-read from
``chunks_vec_changes`` (a logged id that is gone from SQLite is dropped).
"""

from __future__ import annotations

import threading
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from mindfile.embed.base import Vector
from mindfile.storage.db import Database
from mindfile.vector.base import (
    VectorFilter,
    changes_since,
    fetch_rows,
    fetch_rows_after,
)

__all__ = ["ExactIndex"]

_G = TypeVar("_G", bound=np.generic)


class ExactIndex:
    """Brute-force exact top-k by matrix-vector product (BLAS)."""

    name = "exact"

    def __init__(self, db: Database, dims: int) -> None:
        self._db = db
        self._dims = dims
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._ids = np.zeros(0, dtype=np.int64)
        self._matrix = np.zeros((0, self._dims), dtype=np.float32)
        self._codes = np.zeros(0, dtype=np.int32)
        self._n = 0
        self._session_codes: dict[str, int] = {}
        self._max_id = 0
        self._changes_seen: int | None = None
        self._data_version: tuple[int, int] | None = None
        self._dirty = True

    # -- catching up --------------------------------------------------------------------

    def invalidate(self) -> None:
        self._dirty = True

    def rebuild(self) -> None:
        with self._db.lock, self._lock:
            self._reset()
            self._catch_up_locked()

    def _catch_up(self) -> None:
        """Load what changed since the last look. Lock order: database, then index."""
        with self._db.lock, self._lock:
            self._catch_up_locked()

    def _catch_up_locked(self) -> None:
        if self._db.in_write_transaction:
            return  # serve the last committed state: uncommitted rows may roll back
        version = self._db.change_token()
        if not self._dirty and version == self._data_version:
            return
        seen, changed = changes_since(self._db, self._changes_seen)
        if changed is None:  # the change log was pruned past what we saw: reload all
            self._reset()
        before = self._max_id
        batch = fetch_rows_after(self._db, before, self._dims)
        if len(batch.ids):
            self._append(batch.ids, batch.matrix, self._codes_for(batch.sessions))
        # Ids above ``before`` were just read, after the log was: already current.
        changed = [r for r in changed or () if r <= before]
        if changed:
            self._reload(changed)
        self._changes_seen = seen
        self._data_version = version
        self._dirty = False

    def _codes_for(self, sessions: list[str]) -> npt.NDArray[np.int32]:
        return np.fromiter(
            (self._session_codes.setdefault(s, len(self._session_codes)) for s in sessions),
            dtype=np.int32,
            count=len(sessions),
        )

    def _reload(self, rowids: list[int]) -> None:
        """Re-read logged ids: replace held vectors, add missing ones, drop deleted ones."""
        batch = fetch_rows(self._db, rowids, self._dims)
        held = self._ids[: self._n]
        hits = np.flatnonzero(np.isin(held, np.asarray(rowids, dtype=np.int64)))
        positions = {int(held[i]): int(i) for i in hits}
        codes = self._codes_for(batch.sessions)
        fresh: list[int] = []
        for j, rowid in enumerate(batch.ids.tolist()):
            at = positions.pop(int(rowid), None)
            if at is None:
                fresh.append(j)
            else:
                self._matrix[at] = batch.matrix[j]
                self._codes[at] = codes[j]
        if fresh:
            self._append(batch.ids[fresh], batch.matrix[fresh], codes[fresh])
        if positions:  # logged ids whose vector is gone
            keep = np.ones(self._n, dtype=np.bool_)
            keep[list(positions.values())] = False
            self._compact(keep)

    def _append(
        self,
        ids: npt.NDArray[np.int64],
        matrix: npt.NDArray[np.float32],
        codes: npt.NDArray[np.int32],
    ) -> None:
        need = self._n + len(ids)
        if need > len(self._ids):
            cap = max(need, 2 * len(self._ids), 1024)
            self._ids = _grow(self._ids, cap)
            self._codes = _grow(self._codes, cap)
            grown = np.zeros((cap, self._dims), dtype=np.float32)
            grown[: self._n] = self._matrix[: self._n]
            self._matrix = grown
        self._ids[self._n : need] = ids
        self._codes[self._n : need] = codes
        self._matrix[self._n : need] = matrix
        self._n = need
        self._max_id = max(self._max_id, int(ids.max()))

    def _compact(self, keep: npt.NDArray[np.bool_]) -> None:
        n = int(keep.sum())
        self._ids = self._ids[: self._n][keep].copy()
        self._codes = self._codes[: self._n][keep].copy()
        self._matrix = self._matrix[: self._n][keep].copy()
        self._n = n
        # The highest id may be gone: lower the mark so a re-inserted vector is fetched.
        self._max_id = int(self._ids.max()) if n else 0

    # -- searching ----------------------------------------------------------------------

    def size(self) -> int:
        self._catch_up()
        with self._lock:
            return self._n

    def search(
        self, query: Vector, k: int, *, where: VectorFilter | None = None
    ) -> list[tuple[int, float]]:
        self._catch_up()
        with self._lock:  # the product runs without the database's lock
            n = self._n
            if n == 0 or k <= 0:
                return []
            scores = self._matrix[:n] @ np.asarray(query, dtype=np.float32)
            mask = self._mask(where)
            if mask is not None:
                idx = np.flatnonzero(mask)
                if len(idx) == 0:
                    return []
                scores = scores[idx]
            else:
                idx = None
            ids = self._ids[:n] if idx is None else self._ids[idx]
            top = _top_k(scores, ids, k)
            rows = top if idx is None else idx[top]
            return [(int(self._ids[r]), float(s)) for r, s in zip(rows, scores[top], strict=True)]

    def _mask(self, where: VectorFilter | None) -> npt.NDArray[np.bool_] | None:
        if where is None:
            return None
        mask: npt.NDArray[np.bool_] | None = None
        if where.session_ids is not None:
            codes = [self._session_codes[s] for s in where.session_ids if s in self._session_codes]
            mask = np.isin(self._codes[: self._n], np.array(codes, dtype=np.int32))
        if where.rowids is not None:
            allowed = np.isin(self._ids[: self._n], where.rowids)
            mask = allowed if mask is None else mask & allowed
        return mask

    def close(self) -> None:
        with self._lock:
            self._reset()


def _grow(arr: npt.NDArray[_G], cap: int) -> npt.NDArray[_G]:
    out = np.zeros(cap, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


def _top_k(
    scores: npt.NDArray[np.float32], ids: npt.NDArray[np.int64], k: int
) -> npt.NDArray[np.intp]:
    """Positions of the ``k`` best scores, best first; ties go to the higher id.

    Every score tied with the k-th is considered before truncating, so the top ``k`` is
    the same set whatever ``k`` (a prefix of the top ``k + 1``).
    """
    if k < len(scores):
        part = np.argpartition(-scores, k - 1)[:k]
        part = np.flatnonzero(scores >= scores[part].min())
    else:
        part = np.arange(len(scores))
    order = np.lexsort((-ids[part], -scores[part]))[:k]
    return part[order]
