"""pgvector: vectors round-trip as float32, the HNSW cosine index answers like brute force."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from mindfile.errors import InvalidInputError
from mindfile.storage.postgres import PgDatabase, apply_pg_migrations
from mindfile.storage.postgres.vectors import (
    ensure_vector_index,
    get_vectors,
    nearest,
    put_vectors,
    vector_index_name,
)

NOW = "2026-01-01T00:00:00.000000+00:00"
DIMS = 32


@pytest.fixture
def db(pg_url: str) -> Iterator[PgDatabase]:
    with PgDatabase(pg_url) as opened:
        apply_pg_migrations(opened)
        yield opened


def _chunks(db: PgDatabase, n: int) -> list[int]:
    db.execute(
        "INSERT INTO sessions (session_id, created_at, updated_at) VALUES ('s', %s, %s)",
        (NOW, NOW),
    )
    return [
        int(
            db.scalar(
                "INSERT INTO chunks (chunk_id, session_id, chunk_text, content_hash, "
                "sequence_start, sequence_end, created_at) "
                "VALUES (%s, 's', %s, %s, %s, %s, %s) RETURNING id",
                (f"ch_{i}", f"text {i}", f"h{i}", i, i, NOW),
            )
        )
        for i in range(n)
    ]


def _unit(rng: np.random.Generator, n: int, dims: int) -> np.ndarray:
    vectors = rng.standard_normal((n, dims)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_vectors_round_trip_as_float32(db: PgDatabase) -> None:
    [rowid] = _chunks(db, 1)
    vector = _unit(np.random.default_rng(1), 1, DIMS)[0]
    put_vectors(db, [(rowid, vector)], "m1")
    stored = get_vectors(db, [rowid, 999])[rowid]
    assert get_vectors(db, [999]) == {}
    assert stored.dtype == np.float32
    assert np.array_equal(stored, vector)
    # Rewriting a vector replaces it and logs the change for derived indexes.
    put_vectors(db, [(rowid, -vector)], "m2")
    assert db.scalar("SELECT embedding_model FROM chunks_vec") == "m2"
    assert db.scalar("SELECT count(*) FROM chunks_vec_changes") == 2


def test_the_hnsw_index_answers_like_brute_force(db: PgDatabase) -> None:
    rng = np.random.default_rng(7)
    rowids = _chunks(db, 400)
    vectors = _unit(rng, len(rowids), DIMS)
    put_vectors(db, list(zip(rowids, vectors, strict=True)), "m1")
    other = _unit(rng, 1, DIMS + 1)[0]  # another model's size: never in the answers
    db.execute("UPDATE chunks_vec SET embedding = %s WHERE chunk_rowid = %s", (other, rowids[0]))
    name = ensure_vector_index(db, DIMS)
    assert ensure_vector_index(db, DIMS) == name == vector_index_name(DIMS)
    definition = db.scalar("SELECT indexdef FROM pg_indexes WHERE indexname = %s", (name,))
    assert "hnsw" in definition and "vector_cosine_ops" in definition

    live = np.array(rowids[1:])
    matrix = vectors[1:]
    recall = []
    for query in _unit(rng, 20, DIMS):
        expected = live[np.argsort(-(matrix @ query))[:10]]
        got = nearest(db, query, 10, ef_search=100)
        assert rowids[0] not in [r for r, _ in got]
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        top_score = float(matrix[np.where(live == got[0][0])[0][0]] @ query)
        assert got[0][1] == pytest.approx(top_score, abs=1e-5)  # cosine similarity
        recall.append(len(set(expected) & {r for r, _ in got}) / 10)
    assert np.mean(recall) >= 0.9

    with db.atomic():
        db.execute("SET LOCAL enable_seqscan = off")
        plan = " ".join(
            str(r[0])
            for r in db.query(
                "EXPLAIN SELECT chunk_rowid FROM chunks_vec WHERE vector_dims(embedding) = "
                f"{DIMS} ORDER BY embedding::vector({DIMS}) <=> %s::vector({DIMS}) LIMIT 5",
                (vectors[1],),
            )
        )
    assert name in plan


def test_dimensions_are_checked(db: PgDatabase) -> None:
    with pytest.raises(InvalidInputError):
        ensure_vector_index(db, 0)
    with pytest.raises(InvalidInputError):
        vector_index_name(4096)
