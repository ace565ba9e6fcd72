"""The :class:`VectorIndex` seam.

SQLite's ``chunks_vec`` table is the source of truth; an index is derived from it and
can always be rebuilt. Indexes catch up lazily before each search (``PRAGMA
data_version`` tells when another connection committed), so they stay correct when
another process writes the same file.

Score contract: ``search`` returns ``(chunk_rowid, cosine_similarity)`` pairs, best
first, similarity in [-1, 1] (vectors are L2-normalised).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from engram.embed.base import Vector
from engram.storage.db import Database

__all__ = ["VectorFilter", "VectorIndex", "VectorRows", "fetch_rows_after", "vector_stats"]


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

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class VectorRows:
    """A batch read from ``chunks_vec``: ids ascending, float32 matrix, session ids."""

    ids: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]
    sessions: list[str]


def fetch_rows_after(db: Database, after: int, dims: int) -> VectorRows:
    """Vectors with ``chunk_rowid > after``, in id order."""
    rows = db.query(
        "SELECT v.chunk_rowid, v.embedding_blob, c.session_id FROM chunks_vec AS v "
        "JOIN chunks AS c ON c.id = v.chunk_rowid WHERE v.chunk_rowid > ? "
        "ORDER BY v.chunk_rowid",
        (after,),
    )
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    if rows:
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(-1, dims)
        matrix = matrix.astype(np.float32, copy=True)
    else:
        matrix = np.zeros((0, dims), dtype=np.float32)
    return VectorRows(ids, matrix, [r[2] for r in rows])


def vector_stats(db: Database) -> tuple[int, int]:
    """``(count, max_rowid)`` of ``chunks_vec``."""
    row = db.query_one("SELECT count(*), coalesce(max(chunk_rowid), 0) FROM chunks_vec")
    assert row is not None
    return int(row[0]), int(row[1])
