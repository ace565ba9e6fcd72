"""Vector indexes derived from ``chunks_vec``: in-memory exact (default), sqlite-vec, and
the on-disk ANN indexes zvec and LanceDB (optional extras, imported when asked for); on
a Postgres store, pgvector's HNSW index (``vector/pgvector_index.py``)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from mindfile.errors import ConfigError
from mindfile.storage.db import Database
from mindfile.vector.base import VectorFilter, VectorIndex, vector_max
from mindfile.vector.exact import ExactIndex
from mindfile.vector.sqlite_vec import SqliteVecIndex

if TYPE_CHECKING:
    from mindfile.storage.postgres.db import PgDatabase

__all__ = [
    "AUTO_ANN_CHUNKS",
    "POSTGRES_INDEXES",
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


#: The choices on a Postgres store (``"exact"``: in each process's heap).
POSTGRES_INDEXES = ("auto", "pgvector", "exact")

#: Why each SQLite-side index cannot serve a Postgres store.
_NOT_ON_POSTGRES = {
    "sqlite-vec": "it is a vec0 table inside a SQLite store file",
    "zvec": "its base lives in a folder next to a SQLite store file",
    "lancedb": "its base lives in a folder next to a SQLite store file",
}


def _postgres(db: object) -> PgDatabase | None:
    """``db`` as a Postgres database, or None. Without a look at psycopg: if the
    Postgres module was never imported, ``db`` cannot be one of its databases (and the
    core install, which has no psycopg, never imports it)."""
    module = sys.modules.get("mindfile.storage.postgres.db")
    if module is not None and isinstance(db, module.PgDatabase):
        return cast("PgDatabase", db)
    return None


def _make_postgres_index(name: str, db: PgDatabase, dims: int) -> VectorIndex:
    if name == "auto":
        name = choose_index(db)[0]
    if name == "pgvector":
        from mindfile.vector.pgvector_index import PgVectorIndex

        return PgVectorIndex(db, dims)
    if name == "exact":
        return ExactIndex(db, dims)  # in the heap: no store file
    reason = _NOT_ON_POSTGRES.get(name)
    if reason is not None:
        raise ConfigError(
            f"vector_index={name!r} cannot serve a Postgres store ({reason}); "
            'use "auto", "exact" or "pgvector"',
            index=name,
            choices=list(POSTGRES_INDEXES),
        )
    raise ConfigError(
        f"unknown vector index {name!r} (on Postgres: {', '.join(POSTGRES_INDEXES)})",
        index=name,
        choices=list(POSTGRES_INDEXES),
    )


def choose_index(db: Database | PgDatabase) -> tuple[str, str]:
    """What ``vector_index="auto"`` opens for this store, and why (shown by info()).

    On Postgres: the exact index (in each process's heap, caught up from the change
    log) below :data:`AUTO_ANN_CHUNKS` vectors, as on SQLite, and pgvector's HNSW from
    there. pgvector's graph finds only 0.58-0.70 of the bundled model's exact top 10 at
    20k-100k vectors even at ``ef_search`` 160 (benchmarks/README.md, "pgvector"),
    so below that size the exact index keeps SQLite's recall."""
    pg = _postgres(db)
    if pg is not None:
        if vector_max(pg) < AUTO_ANN_CHUNKS:
            return "exact", f"auto: exact below {AUTO_ANN_CHUNKS:,} chunks (in the heap)"
        return "pgvector", "auto: pgvector (HNSW inside the Postgres store)"
    db = cast(Database, db)
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


def make_index(name: str, db: Database | PgDatabase, dims: int) -> VectorIndex:
    """Build the named vector index over ``db``'s vectors (``"auto"``: see
    :func:`choose_index`). ``db`` may be a Postgres database; ``"pgvector"`` on a SQLite
    store is a ``ConfigError``."""
    pg = _postgres(db)
    if pg is not None:
        return _make_postgres_index(name, pg, dims)
    db = cast(Database, db)
    if name == "pgvector":
        raise ConfigError(
            'vector_index="pgvector" needs a Postgres store (postgresql:// URL); '
            f"a SQLite store has: auto, {', '.join(sorted(_INDEXES))}",
            index=name,
        )
    if name == "auto":
        name = choose_index(db)[0]
    factory = _INDEXES.get(name)
    if factory is None:
        raise ConfigError(f"unknown vector index {name!r} (known: {', '.join(sorted(_INDEXES))})")
    return factory(db, dims)
