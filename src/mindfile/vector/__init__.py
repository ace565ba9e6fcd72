"""Vector indexes derived from ``chunks_vec``: in-memory exact (default), sqlite-vec, and
the on-disk ANN indexes zvec and LanceDB (optional extras, imported when asked for)."""

from __future__ import annotations

from collections.abc import Callable

from mindfile.errors import ConfigError
from mindfile.storage.db import Database
from mindfile.vector.base import VectorFilter, VectorIndex
from mindfile.vector.exact import ExactIndex
from mindfile.vector.sqlite_vec import SqliteVecIndex

__all__ = ["ExactIndex", "SqliteVecIndex", "VectorFilter", "VectorIndex", "make_index"]


def _zvec(db: Database, dims: int) -> VectorIndex:
    from mindfile.vector.zvec_index import ZvecIndex

    return ZvecIndex(db, dims)


def _lancedb(db: Database, dims: int) -> VectorIndex:
    from mindfile.vector.lance_index import LanceIndex

    return LanceIndex(db, dims)


_INDEXES: dict[str, Callable[[Database, int], VectorIndex]] = {
    "exact": ExactIndex,
    "sqlite-vec": SqliteVecIndex,
    "zvec": _zvec,
    "lancedb": _lancedb,
}


def make_index(name: str, db: Database, dims: int) -> VectorIndex:
    """Build the named vector index over ``db``'s vectors."""
    factory = _INDEXES.get(name)
    if factory is None:
        raise ConfigError(f"unknown vector index {name!r} (known: {', '.join(sorted(_INDEXES))})")
    return factory(db, dims)
