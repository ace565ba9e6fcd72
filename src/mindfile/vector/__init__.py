"""Vector indexes derived from ``chunks_vec``: in-memory exact (default) and sqlite-vec."""

from __future__ import annotations

from collections.abc import Callable

from mindfile.errors import ConfigError
from mindfile.storage.db import Database
from mindfile.vector.base import VectorFilter, VectorIndex
from mindfile.vector.exact import ExactIndex
from mindfile.vector.sqlite_vec import SqliteVecIndex

__all__ = ["ExactIndex", "SqliteVecIndex", "VectorFilter", "VectorIndex", "make_index"]

_INDEXES: dict[str, Callable[[Database, int], VectorIndex]] = {
    "exact": ExactIndex,
    "sqlite-vec": SqliteVecIndex,
}


def make_index(name: str, db: Database, dims: int) -> VectorIndex:
    """Build the named vector index over ``db``'s vectors."""
    factory = _INDEXES.get(name)
    if factory is None:
        raise ConfigError(f"unknown vector index {name!r} (known: {', '.join(sorted(_INDEXES))})")
    return factory(db, dims)
