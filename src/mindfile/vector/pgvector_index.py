"""``vector_index="pgvector"``: the vector index of a Postgres store is pgvector's HNSW.

On Postgres the vectors live in ``chunks_vec.embedding`` (a pgvector ``vector``) and the
index is an HNSW expression index per dimensions inside the database
(``storage/postgres/vectors.py``, :func:`ensure_vector_index`). Postgres keeps that index
current in the same transaction as every write, by any process on any host, so unlike
the derived indexes of a SQLite store this one holds no copy of anything: there is
nothing to catch up (``invalidate`` is a no-op), nothing outside the store to purge
(``purge``; deleted vectors leave with ``VACUUM``, which ``PrivacyStore.purge`` runs),
and ``rebuild`` is a ``REINDEX`` (a graph without dead tuples).

A search runs in SQL with the filter inside the statement (a session join, a chunk id
list), never as an over-fetch; a selective filter is answered by scoring every allowed
row, an unselective one by the graph with pgvector's iterative scan, and the exact scan
answers whenever the graph comes back short (:func:`search_vectors`). A store of at
most ``exact_max_rows`` vectors is scanned exactly without a filter too (recall 1.0
where the graph is cheapest to skip; counted at most every :data:`RECOUNT_SECONDS`,
so a store that just grew past it is scanned a little longer). Scores are the
inner product, the cosine similarity of the normalised vectors, like the other indexes
(0.0 for an all-zero vector); ties go to the higher chunk id, as in ``search_rows``.
"""

from __future__ import annotations

import time

from mindfile.embed.base import Vector
from mindfile.storage.postgres.db import PgDatabase
from mindfile.storage.postgres.vectors import (
    EXACT_MAX_ROWS,
    MAX_SCAN_TUPLES,
    count_vectors,
    ensure_vector_index,
    rebuild_vector_index,
    search_vectors,
    vector_index_exists,
)
from mindfile.vector.base import VectorFilter

__all__ = ["DEFAULT_EF_SEARCH", "PgVectorIndex"]

#: ``hnsw.ef_search`` of a search (pgvector's default is 40). Measured with
#: benchmarks/pg_vector.py (m=16, ef_construction=64): the smallest of 40/80/160 that
#: gave recall@10 >= 0.95 against the exact top 10 on structured synthetic 256-d
#: vectors at 20k (0.84-0.86 / 0.88-0.91 / 0.98-0.99; 0.85-0.90 at 100k). The static model's
#: vectors are much harder for the graph (they share one dominant direction, and
#: questions sit away from the messages): 0.70 at 20k and 0.58 at 100k at this setting,
#: 0.95 only at ef_search 1000 at 20k (benchmarks/README.md, "pgvector (issue 13)").
#: Raise ``index.ef_search`` (up to 1000) where recall matters more than latency.
DEFAULT_EF_SEARCH = 160
#: Seconds between counts of the store's vectors (is it still small enough to scan?).
RECOUNT_SECONDS = 30.0


class PgVectorIndex:
    """A :class:`~mindfile.vector.VectorIndex` over pgvector's HNSW index of ``dims``."""

    name = "pgvector"

    def __init__(
        self,
        db: PgDatabase,
        dims: int,
        *,
        ef_search: int = DEFAULT_EF_SEARCH,
        exact_max_rows: int = EXACT_MAX_ROWS,
        max_scan_tuples: int = MAX_SCAN_TUPLES,
    ) -> None:
        self._db = db
        self._dims = dims
        #: ``hnsw.ef_search`` per query (may be changed between searches).
        self.ef_search = ef_search
        self.exact_max_rows = exact_max_rows
        self.max_scan_tuples = max_scan_tuples
        self.recount_seconds = RECOUNT_SECONDS
        self._held: int | None = None  # vectors counted up to exact_max_rows + 1
        self._counted_at = 0.0
        #: How the last search was answered ("hnsw", "exact", "hnsw+exact"; stats()).
        self.last_method: str | None = None
        # Built once per store and size, here: the store's model (its size) is known.
        self._index = ensure_vector_index(db, dims)

    def search(
        self, query: Vector, k: int, *, where: VectorFilter | None = None
    ) -> list[tuple[int, float]]:
        sessions = None if where is None else where.session_ids
        rowids = None if where is None or where.rowids is None else where.rowids.tolist()
        hits = search_vectors(
            self._db,
            query,
            k,
            dimensions=self._dims,
            session_ids=sessions,
            rowids=rowids,
            ef_search=self.ef_search,
            exact_max_rows=self.exact_max_rows,
            max_scan_tuples=self.max_scan_tuples,
            small_store=where is None and self._small(),
        )
        self.last_method = hits.method
        return hits.rows

    def _small(self) -> bool:
        """Whether the store holds at most ``exact_max_rows`` vectors of this size (as
        of a count at most ``recount_seconds`` old)."""
        now = time.monotonic()
        if self._held is None or now - self._counted_at >= self.recount_seconds:
            self._held = count_vectors(self._db, self._dims, upto=self.exact_max_rows + 1)
            self._counted_at = now
        return self._held <= self.exact_max_rows

    def invalidate(self) -> None:
        """Nothing to do: Postgres updates the index with every write, in its transaction."""

    def rebuild(self) -> None:
        """``REINDEX`` the HNSW index (a fresh graph without dead tuples)."""
        self._index = rebuild_vector_index(self._db, self._dims)
        self._held = None

    def size(self) -> int:
        return count_vectors(self._db, self._dims)

    def purge(self) -> None:
        """Nothing to do: the index keeps no file outside the database (deleted vectors
        leave its pages with ``VACUUM``, which ``PrivacyStore.purge`` runs)."""

    def stats(self) -> dict[str, object]:
        return {
            "persisted": True,  # in the database, shared by every process and host
            "kind": "hnsw",
            "index": self._index,
            "hnsw_index": vector_index_exists(self._db, self._dims),
            "dims": self._dims,
            "vectors": count_vectors(self._db, self._dims),
            "ef_search": self.ef_search,
            "exact_max_rows": self.exact_max_rows,
            "last_method": self.last_method,
        }

    def close(self) -> None:
        """Nothing to release: the database (and its pool) belongs to the engine."""
