"""Vector indexes derived from ``chunks_vec``: in-memory exact (default), sqlite-vec, and
the on-disk ANN indexes zvec and LanceDB (optional extras, imported when asked for)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

from mindfile.errors import ConfigError
from mindfile.storage.db import Database
from mindfile.vector.base import VectorFilter, VectorIndex, vector_max
from mindfile.vector.exact import ExactIndex
from mindfile.vector.sqlite_vec import SqliteVecIndex

__all__ = [
    "AUTO_ANN_CHUNKS",
    "ExactIndex",
    "SqliteVecIndex",
    "VectorFilter",
    "VectorIndex",
    "choose_index",
    "make_index",
]

#: ``vector_index="auto"`` opens zvec (when installed) for stores of at least this many
#: vectors, the exact index below. Measured (benchmarks/README.md, "Choosing the vector
#: index"): below it the exact index answers within the 5 ms budget with recall 1.0;
#: above it its per-process copy of every vector (~1 KB each) and its scan time grow
#: linearly, while zvec stays at ~3 ms and ~3 MB per process.
AUTO_ANN_CHUNKS = 200_000


def _zvec(db: Database, dims: int) -> VectorIndex:
    from mindfile.vector.zvec_index import ZvecIndex

    return ZvecIndex(db, dims)


def _lancedb(db: Database, dims: int) -> VectorIndex:
    from mindfile.vector.lance_index import LanceIndex

    return LanceIndex(db, dims)


def _exact(db: Database, dims: int) -> VectorIndex:
    """The exact index: its arrays published next to a writable store file and mapped
    by every process (vector/exact_disk.py); in the heap for in-memory and read-only
    stores (vector/exact.py). Same results either way."""
    if db.readonly or db.in_memory:
        return ExactIndex(db, dims)
    from mindfile.vector.exact_disk import ExactDiskIndex

    return ExactDiskIndex(db, dims)


_INDEXES: dict[str, Callable[[Database, int], VectorIndex]] = {
    "exact": _exact,
    "sqlite-vec": SqliteVecIndex,
    "zvec": _zvec,
    "lancedb": _lancedb,
}


def choose_index(db: Database) -> tuple[str, str]:
    """What ``vector_index="auto"`` opens for this store, and why (shown by info())."""
    vectors = vector_max(db)
    if vectors < AUTO_ANN_CHUNKS:
        return "exact", f"auto: exact below {AUTO_ANN_CHUNKS:,} chunks"
    if db.readonly or db.in_memory:
        return "exact", "auto: exact (zvec needs a writable store file)"
    if importlib.util.find_spec("zvec") is None:
        return "exact", (
            f"auto: exact; above {AUTO_ANN_CHUNKS:,} chunks zvec would be used: "
            'pip install "mindfile[zvec]"'
        )
    return "zvec", f"auto: zvec from {AUTO_ANN_CHUNKS:,} chunks"


def make_index(name: str, db: Database, dims: int) -> VectorIndex:
    """Build the named vector index over ``db``'s vectors (``"auto"``: see
    :func:`choose_index`)."""
    if name == "auto":
        name = choose_index(db)[0]
    factory = _INDEXES.get(name)
    if factory is None:
        raise ConfigError(f"unknown vector index {name!r} (known: {', '.join(sorted(_INDEXES))})")
    return factory(db, dims)
