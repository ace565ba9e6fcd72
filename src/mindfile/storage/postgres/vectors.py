"""Vectors in pgvector: the storage side of a Postgres vector index.

``chunks_vec.embedding`` is a ``vector`` of any dimensions (a store may hold vectors of
an old model while it re-embeds). HNSW needs fixed dimensions, so the index is an
expression index per dimensions, ``(embedding::vector(D)) vector_cosine_ops`` over the
rows of that size, made by :func:`ensure_vector_index` once the store's model is known;
:func:`nearest` asks with the same expression so the planner can use it. Vectors are
L2-normalised float32 (as on SQLite), so cosine similarity is ``1 - cosine distance``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from mindfile.errors import InvalidInputError
from mindfile.storage.postgres.db import PgDatabase

__all__ = ["ensure_vector_index", "get_vectors", "nearest", "put_vectors", "vector_index_name"]

#: pgvector's HNSW limit on indexed dimensions (vector type).
MAX_HNSW_DIMENSIONS = 2000

CREATE_INDEX = """
CREATE INDEX IF NOT EXISTS {name} ON chunks_vec
USING hnsw ((embedding::vector({dims})) vector_cosine_ops)
WITH (m = 16, ef_construction = 64)
WHERE vector_dims(embedding) = {dims}
"""

UPSERT_VECTOR = """
INSERT INTO chunks_vec (chunk_rowid, embedding, embedding_model) VALUES (%s, %s, %s)
ON CONFLICT (chunk_rowid) DO UPDATE
SET embedding = EXCLUDED.embedding, embedding_model = EXCLUDED.embedding_model
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


def ensure_vector_index(db: PgDatabase, dimensions: int) -> str:
    """Create the HNSW cosine index for ``dimensions`` if missing; returns its name."""
    name = vector_index_name(dimensions)
    db.execute(CREATE_INDEX.format(name=name, dims=dimensions))
    return name


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
