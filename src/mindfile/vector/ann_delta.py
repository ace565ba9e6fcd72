"""The exact, in-memory part of an ANN index (:class:`~mindfile.vector.ann.AnnIndex`): the
vectors its published base lacks or holds stale, searched exactly (docs/vector-indexes.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from mindfile.vector import _simd
from mindfile.vector.ann_disk import Manifest, RowBatch
from mindfile.vector.base import members
from mindfile.vector.exact import _CODES_USABLE, QUANTIZE_FROM, _Codes, search_rows

__all__ = ["Delta"]

#: Rows from which a delta keeps int8 codes of its vectors (fitted on the rows it holds
#: then; the rows added later are encoded as they come, ~3 us each). Its searches use
#: them from ``QUANTIZE_FROM`` rows, as the exact index does: before the first base is
#: published, the delta of the process that ingested 117k chunks holds all of them, and
#: a float32 product over 117k vectors cost 5-12 ms a search on 2 cores shared with the
#: helpers (the int8 scan ~2-3 ms; benchmarks/README.md). Without simsimd the codes keep
#: the sign bits the numpy stages need; with it, none (see :class:`_Codes`).
CODES_AT = 4_096


class Delta:
    """The exact in-memory part: vectors the base lacks or holds stale.

    Arrays grow by doubling (a catch-up after one write must not copy every vector the
    delta holds, which before the first base is built is all of them)."""

    def __init__(self, dims: int, base: Manifest | None) -> None:
        self.base = base
        self.max_id = base.max_id if base is not None else 0
        self.seq: int | None = base.changes_seq if base is not None else None
        self.rows: dict[int, int] = {}  # chunk id -> row in the arrays
        self._ids = np.zeros(0, dtype=np.int64)
        self._matrix = np.zeros((0, dims), dtype=np.float32)
        self._keys = np.zeros(0, dtype=np.int64)
        self._n = 0
        self.tombstones: set[int] = set()
        self._dims = dims
        self._codes: _Codes | None = None

    def __len__(self) -> int:
        return self._n

    @property
    def ids(self) -> npt.NDArray[np.int64]:
        return self._ids[: self._n]

    def pending(self) -> int:
        """What a merge would fold in: delta rows plus tombstones."""
        return self._n + len(self.tombstones)

    def _reserve(self, need: int) -> None:
        if need <= len(self._ids):
            return
        cap = max(need, 2 * len(self._ids), 256)
        ids = np.zeros(cap, dtype=np.int64)
        keys = np.zeros(cap, dtype=np.int64)
        matrix = np.zeros((cap, self._dims), dtype=np.float32)
        ids[: self._n] = self._ids[: self._n]
        keys[: self._n] = self._keys[: self._n]
        matrix[: self._n] = self._matrix[: self._n]
        self._ids, self._keys, self._matrix = ids, keys, matrix
        if self._codes is not None:
            self._codes.reserve(cap)

    def _encode(self, start: int, end: int) -> None:
        """Keep the codes of rows ``start:end`` (just appended) current; fit the codes
        once the delta holds ``CODES_AT`` rows."""
        if self._codes is None:
            if self._n >= CODES_AT and _CODES_USABLE:
                # Sign bits only for the numpy stages: with the int8 scan, none (their
                # encoding is a BLAS product, whose threads spin on the other core).
                self._codes = _Codes.fit(
                    self._matrix[: self._n],
                    len(self._ids),
                    lambda: False,
                    bits=not _simd.ENABLED,
                )
            return
        self._codes.encode_range(start, self._matrix[start:end], len(self._ids))

    def put(self, batch: RowBatch) -> None:
        """Add the batch's rows, or replace the ones held (their vector was rewritten)."""
        keys = batch.session_keys
        ids = batch.ids
        if len(ids) and int(ids.min()) > self.max_id:
            # Rows written after everything held (a catch-up after a bulk ingest): none
            # is held yet, so append them in one copy.
            n, m = self._n, len(ids)
            self._reserve(n + m)
            self._ids[n : n + m] = ids
            self._matrix[n : n + m] = batch.matrix
            self._keys[n : n + m] = keys
            self.rows.update(zip(ids.tolist(), range(n, n + m), strict=True))
            self._n = n + m
            self.max_id = int(ids.max())
            self._encode(n, n + m)
            return
        replaced: list[int] = []
        fresh: list[int] = []
        for j, i in enumerate(batch.ids.tolist()):
            at = self.rows.get(i)
            if at is None:
                fresh.append(j)
            else:
                self._matrix[at] = batch.matrix[j]
                self._keys[at] = keys[j]
                replaced.append(at)
        if replaced and self._codes is not None:
            at_rows = np.asarray(replaced, dtype=np.intp)
            self._codes.encode_at(at_rows, self._matrix[at_rows])
        if fresh:
            n, m = self._n, len(fresh)
            self._reserve(n + m)
            self._ids[n : n + m] = batch.ids[fresh]
            self._matrix[n : n + m] = batch.matrix[fresh]
            self._keys[n : n + m] = keys[fresh]
            for off, j in enumerate(fresh):
                self.rows[int(batch.ids[j])] = n + off
            self._n = n + m
            self._encode(n, n + m)
        if len(batch.ids):
            self.max_id = max(self.max_id, int(batch.ids.max()))

    def take_above(self, other: Delta, floor: int) -> None:
        """Hold (copies of) ``other``'s rows with ids above ``floor``; this delta is new
        and empty. Its ``max_id`` becomes ``other``'s: it holds everything up to there."""
        assert self._n == 0
        n = other._n
        pick = np.flatnonzero(other._ids[:n] > floor)
        m = len(pick)
        self._reserve(m)
        self._ids[:m] = other._ids[pick]
        self._matrix[:m] = other._matrix[pick]
        self._keys[:m] = other._keys[pick]
        self._n = m
        self.rows = {i: j for j, i in enumerate(self._ids[:m].tolist())}
        self.max_id = max(self.max_id, other.max_id)
        if other._codes is not None and m:  # the same rows' codes, not encoded again
            keep = np.zeros(n, dtype=np.bool_)
            keep[pick] = True
            self._codes = other._codes.subset(keep, len(self._ids))
        else:
            self._encode(0, m)

    def drop(self, rowids: Sequence[int]) -> None:
        gone = [self.rows[i] for i in rowids if i in self.rows]
        if not gone:
            return
        keep = np.ones(self._n, dtype=np.bool_)
        keep[gone] = False
        self._ids = self._ids[: self._n][keep]
        self._matrix = self._matrix[: self._n][keep]
        self._keys = self._keys[: self._n][keep]
        if self._codes is not None:
            self._codes.compact(keep)
        self._n = len(self._ids)
        self.rows = {int(i): n for n, i in enumerate(self._ids.tolist())}

    def search(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        session_keys: Sequence[int] | None,
        rowids: npt.NDArray[np.int64] | None,
    ) -> list[tuple[int, float]]:
        """The exact top ``k`` of the delta, within the sessions (by key) and the
        allowed rowids (ascending) when given."""
        n = self._n
        if not n:
            return []
        ids, keys, matrix = self._ids[:n], self._keys[:n], self._matrix[:n]
        mask: npt.NDArray[np.bool_] | None = None
        if session_keys is not None:
            mask = np.isin(keys, np.asarray(session_keys, dtype=np.int64))
        if rowids is not None:
            allowed = members(ids, rowids)
            mask = allowed if mask is None else mask & allowed
        # The exact index's search (float32 below QUANTIZE_FROM rows, else the int8
        # scan and a float32 rescoring: the same top k); ties with the k-th go to the
        # higher id. Callers hold the index's lock: one search at a time uses the codes.
        return search_rows(matrix, ids, n, self._codes, query, k, mask, QUANTIZE_FROM)
