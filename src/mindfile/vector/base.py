"""The :class:`VectorIndex` seam.

SQLite's ``chunks_vec`` table is the source of truth; an index is derived from it and
can always be rebuilt. Indexes catch up lazily before each search (``PRAGMA
data_version`` tells when another connection committed), so they stay correct when
another process writes the same file.

Catching up relies on chunk ids only growing: new vectors are the ids above the highest
an index holds. Vectors that arrive out of id order (background indexing, repairs), are
rewritten in place or are deleted are logged in ``chunks_vec_changes`` by triggers
(migration 0005); indexes re-read the logged ids.

Score contract: ``search`` returns ``(chunk_rowid, cosine_similarity)`` pairs, best
first, similarity in [-1, 1] (vectors are L2-normalised).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from mindfile.embed.base import Vector
from mindfile.storage.backend import AnyDatabase
from mindfile.storage.db import Database
from mindfile.storage.index_source import VectorRows, blob_matrix, index_source

__all__ = [
    "VectorFilter",
    "VectorIndex",
    "VectorRows",
    "ascending",
    "blob_matrix",
    "changes_since",
    "fetch_rows",
    "fetch_rows_after",
    "members",
    "vector_max",
]


@dataclass(frozen=True, slots=True)
class VectorFilter:
    """Restrict a vector search: to some sessions, and/or to explicit chunk rowids."""

    session_ids: Sequence[str] | None = None
    rowids: npt.NDArray[np.int64] | None = None


class VectorIndex(Protocol):
    """A derived, rebuildable nearest-neighbour index over ``chunks_vec``."""

    name: str

    def search(
        self, query: Vector, k: int, *, where: VectorFilter | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest chunks as ``(chunk_rowid, similarity)``, best first."""
        ...

    def invalidate(self) -> None:
        """Note that this process wrote to ``chunks_vec``: catch up before the next search."""
        ...

    def rebuild(self) -> None:
        """Drop everything derived and reload from ``chunks_vec``."""
        ...

    def size(self) -> int:
        """How many vectors the index holds after catching up."""
        ...

    def purge(self) -> None:
        """After deletes: leave no deleted vector in files outside the store (a no-op
        for indexes that keep none there; docs/privacy.md)."""
        ...

    def stats(self) -> dict[str, object]:
        """What ``info()`` reports of it, as it stands (no catching up): at least
        ``persisted`` (whether a part of it lives in files other processes share)."""
        ...

    def close(self) -> None: ...


def fetch_rows_after(db: Database, after: int, dims: int) -> VectorRows:
    """Vectors with ``chunk_rowid > after``, in id order."""
    return index_source(db).vectors_after(after, dims)


def fetch_rows(db: Database, rowids: Sequence[int], dims: int) -> VectorRows:
    """The vectors of ``rowids`` that exist, in id order."""
    return index_source(db).vectors_by_ids(rowids, dims)


def changes_since(db: Database, seen: int | None) -> tuple[int, list[int] | None]:
    """``(newest_seq, rowids)`` of vectors changed after ``seen`` (each id once).

    ``rowids`` is None when the log was pruned past ``seen``: the caller must rebuild.
    """
    return index_source(db).vector_changes_since(seen)


def row_dots(
    matrix: npt.NDArray[np.float32], q: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """``matrix @ q``, row by row: numpy's vecdot streams the rows on one core (3.9 ms
    at 117k x 256), where OpenBLAS's matrix-vector kernel takes 6 ms on two cores (11 ms
    on one) and spins its threads between calls. Each row's score is computed alike
    whatever matrix holds it, so indexes that split vectors (a base and a delta) give
    the same float32 scores as one matrix."""
    if hasattr(np, "vecdot"):
        out: npt.NDArray[np.float32] = np.vecdot(matrix, q)
        return out
    return matrix @ q


def ascending(rowids: Sequence[int] | npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``rowids`` as a sorted int64 array without repeats (as given when it already is:
    a read filter's rowids come ascending, and sorting 200k of them costs milliseconds)."""
    arr = np.asarray(rowids, dtype=np.int64)
    if arr.ndim == 1 and (len(arr) < 2 or bool(np.all(arr[1:] > arr[:-1]))):
        return arr
    return np.unique(arr)


def members(values: npt.NDArray[np.int64], allowed: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Which of ``values`` are in ``allowed`` (sorted ascending, :func:`ascending`): a
    binary search each, so a few hundred candidates against a filter of 200k rowids
    cost microseconds, not a sort of the filter (``np.isin``)."""
    if not len(allowed):
        return np.zeros(len(values), dtype=np.bool_)
    at = np.minimum(np.searchsorted(allowed, values), len(allowed) - 1)
    found: npt.NDArray[np.bool_] = allowed[at] == values
    return found


def vector_max(db: AnyDatabase) -> int:
    """The highest ``chunk_rowid`` in ``chunks_vec`` (a b-tree seek, not a scan)."""
    return index_source(db).vector_max_id()
