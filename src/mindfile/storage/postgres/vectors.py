"""Vectors in pgvector: the storage side of a Postgres vector index.

``chunks_vec.embedding`` is a ``vector`` of any dimensions (a store may hold vectors of
an old model while it re-embeds). HNSW needs fixed dimensions, so the index is an
expression index per dimensions, ``(embedding::vector(D)) vector_cosine_ops`` over the
rows of that size, made by :func:`ensure_vector_index` once the store's model is known;
:func:`nearest` and :func:`search_vectors` ask with the same expression so the planner
can use it. Vectors are L2-normalised float32 (as on SQLite), so cosine similarity is
``1 - cosine distance``, and also the inner product.

:func:`search_vectors` is what ``vector/pgvector_index.py`` (``vector_index="pgvector"``)
runs: the HNSW index for unfiltered and unselective filters, an exact scan of the
allowed rows for selective ones (docs/postgres.md, "Vectors").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from mindfile.errors import InvalidInputError
from mindfile.storage.postgres.db import PgDatabase

__all__ = [
    "VectorHits",
    "count_vectors",
    "ensure_vector_index",
    "explain_search",
    "get_vectors",
    "nearest",
    "put_vectors",
    "rebuild_vector_index",
    "search_vectors",
    "vector_index_exists",
    "vector_index_name",
]

#: pgvector's HNSW limit on indexed dimensions (vector type).
MAX_HNSW_DIMENSIONS = 2000

CREATE_INDEX = """
CREATE INDEX IF NOT EXISTS {name} ON chunks_vec
USING hnsw ((embedding::vector({dims})) vector_cosine_ops)
WITH (m = 16, ef_construction = 64)
WHERE vector_dims(embedding) = {dims}
"""

# pgvector's HNSW leaves out vectors with no cosine distance (all zeros: text the model
# has no token for, such as an emoji). This small partial index finds them, so that a
# search can add them as candidates scored 0.0, as the exact index scores them.
CREATE_ZERO_INDEX = """
CREATE INDEX IF NOT EXISTS {name} ON chunks_vec (chunk_rowid)
WHERE vector_dims(embedding) = {dims} AND vector_norm(embedding) = 0
"""

# Two processes opening a new store at once would both try to create the index; the
# loser of that race gets a unique violation on the catalog, not "already exists".
LOCK_INDEX_CREATION = "SELECT pg_advisory_xact_lock(hashtext('mindfile_vector_index'), %s)"

INDEX_EXISTS = "SELECT to_regclass(%s) IS NOT NULL"

COUNT_VECTORS = "SELECT count(*) FROM chunks_vec WHERE vector_dims(embedding) = %s"
COUNT_VECTORS_UPTO = """
SELECT count(*) FROM (
    SELECT 1 FROM chunks_vec WHERE vector_dims(embedding) = %s LIMIT %s
) AS held
"""

UPSERT_VECTOR = """
INSERT INTO chunks_vec (chunk_rowid, embedding, embedding_model) VALUES (%s, %s, %s)
ON CONFLICT (chunk_rowid) DO UPDATE
SET embedding = EXCLUDED.embedding, embedding_model = EXCLUDED.embedding_model
"""

#: A filtered search whose filter allows at most this many rows scores them all exactly
#: instead of walking the HNSW graph. Measured (benchmarks/README.md, "pgvector (issue
#: 13)"): up to ~1,000-5,000 allowed rows the exact scan was as fast or faster than the
#: graph's iterative scan, and it has recall 1.0 where the filtered graph had 0.5-0.9;
#: from ~10,000 rows it took 250+ ms.
EXACT_MAX_ROWS = 5_000
#: ``hnsw.max_scan_tuples`` of an HNSW search: how far an iterative scan may walk the
#: graph looking for rows that pass a filter before it gives up (pgvector's default).
MAX_SCAN_TUPLES = 20_000
#: Candidates fetched beyond ``k`` from the graph, so that rows tied with the k-th
#: score are ranked by the tie rule (higher chunk id first) before truncating.
TIE_MARGIN = 8
#: pgvector's bounds on ``hnsw.ef_search``.
EF_SEARCH_RANGE = (1, 1000)

SET_SEARCH = (
    "SELECT set_config('hnsw.ef_search', %s, true), "
    "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
    "set_config('hnsw.max_scan_tuples', %s, true)"
)

# The graph's candidates (approximately in distance order: the iterative scan's relaxed
# order), re-ranked by score; plus the all-zero vectors the graph leaves out, scored 0.
# The score is the inner product: the cosine similarity of L2-normalised vectors, and
# exactly what the exact index computes (0.0 for a zero vector, where cosine distance
# is NaN). MATERIALIZED keeps the LIMIT on the index scan's output (pgvector's advice
# for relaxed order).
HNSW_SEARCH = """
WITH near AS MATERIALIZED (
    SELECT v.chunk_rowid,
           v.embedding::vector({dims}) <=> %(q)s::vector({dims}) AS distance,
           -(v.embedding::vector({dims}) <#> %(q)s::vector({dims})) AS score
    FROM chunks_vec AS v{join}
    WHERE vector_dims(v.embedding) = {dims}{where}
    ORDER BY distance
    LIMIT %(fetch)s
)
SELECT chunk_rowid, score FROM near
UNION
SELECT v.chunk_rowid, 0.0::double precision FROM chunks_vec AS v{join}
WHERE vector_dims(v.embedding) = {dims} AND vector_norm(v.embedding) = 0{where}
ORDER BY score DESC, chunk_rowid DESC
LIMIT %(k)s
"""

# Every allowed row scored (its ORDER BY is not the index's expression, so the planner
# reads the allowed rows through the chunk id or session b-trees instead).
EXACT_SEARCH = """
SELECT v.chunk_rowid, -(v.embedding::vector({dims}) <#> %(q)s::vector({dims})) AS score
FROM chunks_vec AS v{join}
WHERE vector_dims(v.embedding) = {dims}{where}
ORDER BY score DESC, v.chunk_rowid DESC
LIMIT %(k)s
"""

SESSION_JOIN = " JOIN chunks AS c ON c.id = v.chunk_rowid"
IN_SESSIONS = " AND c.session_id = ANY(%(sessions)s::text[])"
IN_ROWIDS = " AND v.chunk_rowid = ANY(%(rowids)s::bigint[])"

# At most ``limit + 1`` chunk rows of these sessions: enough to choose how to search.
COUNT_IN_SESSIONS = """
SELECT count(*) FROM (
    SELECT 1 FROM chunks WHERE session_id = ANY(%s::text[]) LIMIT %s
) AS allowed
"""

SELECT_VECTORS = "SELECT chunk_rowid, embedding FROM chunks_vec WHERE chunk_rowid = ANY(%s)"

NEAREST = """
SELECT chunk_rowid, 1 - (embedding::vector({dims}) <=> %(q)s::vector({dims})) AS score
FROM chunks_vec
WHERE vector_dims(embedding) = {dims}
ORDER BY embedding::vector({dims}) <=> %(q)s::vector({dims})
LIMIT %(k)s
"""


def _dims(dimensions: int) -> int:
    if not isinstance(dimensions, int) or not 1 <= dimensions <= MAX_HNSW_DIMENSIONS:
        raise InvalidInputError(
            f"vector dimensions must be 1..{MAX_HNSW_DIMENSIONS} for an HNSW index, "
            f"not {dimensions!r}"
        )
    return dimensions


def vector_index_name(dimensions: int) -> str:
    """The HNSW index of vectors with ``dimensions`` components."""
    return f"chunks_vec_hnsw_{_dims(dimensions)}"


def _zero_index_name(dimensions: int) -> str:
    return f"chunks_vec_zero_{_dims(dimensions)}"


def vector_index_exists(db: PgDatabase, dimensions: int) -> bool:
    """Whether the HNSW index of ``dimensions`` exists (in the schema on the search path)."""
    return bool(db.scalar(INDEX_EXISTS, (vector_index_name(dimensions),)))


def ensure_vector_index(db: PgDatabase, dimensions: int) -> str:
    """Create the HNSW cosine index for ``dimensions`` if missing; returns its name.

    Creating it builds the graph over every vector of that size already stored (minutes
    at millions of rows; writes to ``chunks_vec`` wait meanwhile), once per store and
    size. Concurrent callers are serialised by an advisory lock, so only one builds.
    """
    name = vector_index_name(dimensions)
    zero = _zero_index_name(dimensions)
    if vector_index_exists(db, dimensions) and db.scalar(INDEX_EXISTS, (zero,)):
        return name
    with db.atomic():
        db.execute(LOCK_INDEX_CREATION, (dimensions,))
        db.execute(CREATE_INDEX.format(name=name, dims=dimensions))
        db.execute(CREATE_ZERO_INDEX.format(name=zero, dims=dimensions))
    return name


def rebuild_vector_index(db: PgDatabase, dimensions: int) -> str:
    """Rebuild the HNSW index of ``dimensions`` from the table (``REINDEX``: a graph
    without the dead tuples of deleted and rewritten vectors); creates it if missing."""
    name = ensure_vector_index(db, dimensions)
    db.execute(f"REINDEX INDEX {name}")
    db.execute(f"REINDEX INDEX {_zero_index_name(dimensions)}")
    return name


def count_vectors(db: PgDatabase, dimensions: int, *, upto: int | None = None) -> int:
    """How many stored vectors have ``dimensions`` components (counting stops at
    ``upto``: enough to tell a small store, without reading a large one)."""
    if upto is not None:
        return int(db.scalar(COUNT_VECTORS_UPTO, (_dims(dimensions), upto)))
    return int(db.scalar(COUNT_VECTORS, (_dims(dimensions),)))


def put_vectors(
    db: PgDatabase, rows: Sequence[tuple[int, npt.NDArray[np.float32]]], model_id: str
) -> None:
    """Store (or replace) the vectors of these chunk row ids, in one transaction."""
    with db.atomic():
        db.executemany(
            UPSERT_VECTOR,
            [(rowid, np.asarray(vec, dtype=np.float32), model_id) for rowid, vec in rows],
        )


def get_vectors(db: PgDatabase, rowids: Sequence[int]) -> dict[int, npt.NDArray[np.float32]]:
    """The stored vectors of these chunk row ids (missing ones are left out)."""
    rows = db.query(SELECT_VECTORS, (list(rowids),))
    return {int(rowid): _as_array(value) for rowid, value in rows}


def _as_array(value: object) -> npt.NDArray[np.float32]:
    # pgvector's loader returns its Vector type (numpy inside) or, in older versions, an
    # ndarray: both become a float32 array.
    to_numpy = getattr(value, "to_numpy", None)
    raw = to_numpy() if callable(to_numpy) else value
    return np.asarray(raw, dtype=np.float32)


def nearest(
    db: PgDatabase, query: npt.NDArray[np.float32], k: int, *, ef_search: int | None = None
) -> list[tuple[int, float]]:
    """The ``k`` chunk row ids whose vectors are closest to ``query`` (cosine), with
    their cosine similarity, best first. ``ef_search`` widens HNSW's search (recall)."""
    vector = np.asarray(query, dtype=np.float32)
    dims = _dims(int(vector.shape[0]))
    with db.atomic():
        if ef_search is not None:
            db.execute(f"SET LOCAL hnsw.ef_search = {int(ef_search)}")
        rows = db.query(NEAREST.format(dims=dims), {"q": vector, "k": k})
    return [(int(rowid), float(score)) for rowid, score in rows]


class VectorHits(NamedTuple):
    """What :func:`search_vectors` found, best first, and how: ``"hnsw"`` (the graph),
    ``"exact"`` (a selective filter: every allowed row scored) or ``"hnsw+exact"`` (the
    graph came back with fewer than ``k`` rows, so the exact scan answered)."""

    rows: list[tuple[int, float]]
    method: str


def _query_vector(query: npt.NDArray[np.floating], dimensions: int) -> npt.NDArray[np.float32]:
    dims = _dims(dimensions)
    vector = np.asarray(query, dtype=np.float32)
    if vector.shape != (dims,):
        raise InvalidInputError(
            f"a query vector of {dims} dimensions is needed, not shape {vector.shape}"
        )
    if not np.all(np.isfinite(vector)):
        raise InvalidInputError("the query vector has a NaN or infinite component")
    return vector


def _filter(
    session_ids: Sequence[str] | None, rowids: Sequence[int] | None
) -> tuple[str, str, dict[str, Any]]:
    """The join, the ``AND ...`` conditions and their parameters of a filter."""
    join, where = "", ""
    params: dict[str, Any] = {}
    if session_ids is not None:
        join, where = SESSION_JOIN, IN_SESSIONS
        params["sessions"] = list(session_ids)
    if rowids is not None:
        where += IN_ROWIDS
        params["rowids"] = [int(r) for r in rowids]
    return join, where, params


def _selective(
    db: PgDatabase,
    session_ids: Sequence[str] | None,
    rowids: Sequence[int] | None,
    limit: int,
) -> bool:
    """Whether the filter allows at most ``limit`` rows (counted up to ``limit + 1``)."""
    if rowids is not None and len(rowids) <= limit:
        return True
    if session_ids is None:
        return False
    return int(db.scalar(COUNT_IN_SESSIONS, (list(session_ids), limit + 1))) <= limit


def _rows(db: PgDatabase, sql: str, params: dict[str, Any]) -> list[tuple[int, float]]:
    return [(int(rowid), float(score)) for rowid, score in db.query(sql, params)]


def search_vectors(
    db: PgDatabase,
    query: npt.NDArray[np.floating],
    k: int,
    *,
    dimensions: int,
    session_ids: Sequence[str] | None = None,
    rowids: Sequence[int] | None = None,
    ef_search: int = 40,
    exact_max_rows: int = EXACT_MAX_ROWS,
    max_scan_tuples: int = MAX_SCAN_TUPLES,
    small_store: bool = False,
) -> VectorHits:
    """The ``k`` vectors of ``dimensions`` components nearest to ``query`` among the rows
    the filter allows (``session_ids``: the chunk's session is one of them; ``rowids``:
    the chunk id is one of them; both: both; an empty one allows nothing), as
    ``(chunk_rowid, similarity)`` best first, ties to the higher chunk id.

    The filter is part of the SQL, never an over-fetch. A filter that allows at most
    ``exact_max_rows`` rows scores them all (exact, through the b-trees). Otherwise the
    HNSW graph answers, with ``hnsw.ef_search`` and pgvector's iterative scan (relaxed
    order), which keeps walking the graph while rows fail the filter, up to
    ``max_scan_tuples``; if it still finds fewer than ``k`` rows, the exact scan
    answers instead, so a filter never costs results that exist. ``small_store``: the
    caller knows the store holds at most ``exact_max_rows`` vectors of this size (the
    same rule without a filter: score them all).

    Settings are ``SET LOCAL`` of one read-only transaction (called inside the caller's
    transaction, they last until that one ends).
    """
    vector = _query_vector(query, dimensions)
    if k <= 0:
        return VectorHits([], "none")
    if (session_ids is not None and not session_ids) or (rowids is not None and not len(rowids)):
        return VectorHits([], "none")
    join, where, params = _filter(session_ids, rowids)
    params.update(q=vector, k=k, fetch=k + TIE_MARGIN)
    exact = EXACT_SEARCH.format(dims=dimensions, join=join, where=where)
    with db.snapshot():
        filtered = session_ids is not None or rowids is not None
        if small_store or (filtered and _selective(db, session_ids, rowids, exact_max_rows)):
            return VectorHits(_rows(db, exact, params), "exact")
        low, high = EF_SEARCH_RANGE
        ef = min(high, max(low, int(ef_search), k + TIE_MARGIN))
        db.execute(SET_SEARCH, (str(ef), str(int(max_scan_tuples))))
        rows = _rows(db, HNSW_SEARCH.format(dims=dimensions, join=join, where=where), params)
        if len(rows) < k:
            return VectorHits(_rows(db, exact, params), "hnsw+exact")
    return VectorHits(rows, "hnsw")


def explain_search(
    db: PgDatabase,
    query: npt.NDArray[np.floating],
    k: int,
    *,
    dimensions: int,
    method: str = "hnsw",
    session_ids: Sequence[str] | None = None,
    rowids: Sequence[int] | None = None,
    ef_search: int = 40,
    analyze: bool = False,
) -> str:
    """The plan Postgres chooses for :func:`search_vectors`'s ``"hnsw"`` or ``"exact"``
    statement (for tests and benchmarks: does the graph answer?)."""
    vector = _query_vector(query, dimensions)
    join, where, params = _filter(session_ids, rowids)
    params.update(q=vector, k=k, fetch=k + TIE_MARGIN)
    template = {"hnsw": HNSW_SEARCH, "exact": EXACT_SEARCH}[method]
    verb = "EXPLAIN (ANALYZE, BUFFERS) " if analyze else "EXPLAIN "
    with db.snapshot():
        db.execute(SET_SEARCH, (str(int(ef_search)), str(MAX_SCAN_TUPLES)))
        plan = db.query(verb + template.format(dims=dimensions, join=join, where=where), params)
    return "\n".join(str(row[0]) for row in plan)
