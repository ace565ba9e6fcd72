"""Derived vector indexes stay exact when vectors arrive out of chunk-id order.

Background jobs write vectors for chunks older than the newest one; the indexes' "new
ids are above the highest I hold" rule cannot see those, so the 0005 triggers log them
in ``chunks_vec_changes`` and indexes re-read the logged ids.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import mindfile
from mindfile.embed.base import to_blob
from mindfile.jobs import queue

from ._support import DIMS, count, messages, open_store

INDEXES = ["exact", "sqlite-vec", "zvec", "lancedb"]


@pytest.fixture(autouse=True)
def merge_eagerly(monkeypatch: pytest.MonkeyPatch) -> None:
    """The on-disk ANN indexes fold every change into their base at once, so the
    out-of-order vectors reach the base (not only the in-memory delta)."""
    from mindfile.vector.lance_index import LanceIndex
    from mindfile.vector.zvec_index import ZvecIndex

    for cls in (ZvecIndex, LanceIndex):
        monkeypatch.setattr(cls, "min_delta", 0)
        monkeypatch.setattr(cls, "background", False)


def nearest(mem: mindfile.Mindfile, text: str) -> tuple[str, float]:
    """The best vector hit for ``text``'s own vector, and its cosine similarity."""
    query = mem.embedder.embed_documents([text])[0]
    hits = mem.search("x", mode="vector", top_k=1, query_embedding=query.tolist())
    return hits[0].text, hits[0].breakdown.vector or 0.0


def held_ids(mem: mindfile.Mindfile) -> list[int]:
    """The chunk ids the reader's vector index holds (a search wider than the store)."""
    query = mem.embedder.embed_query("anything")
    return sorted(i for i, _ in mem.index.search(query, 10**6))


def held(mem: mindfile.Mindfile) -> int:
    return mem.index.size()


def embed_newest(mem: mindfile.Mindfile) -> None:
    """Run the newest chunk's job before the others: its vector has the highest id."""
    mem.db.execute(
        "UPDATE memory_jobs SET next_retry_at = '0' || next_retry_at "
        "WHERE job_id = (SELECT max(job_id) FROM memory_jobs)"
    )
    assert mem.run_jobs(max_jobs=1).succeeded == 1


@pytest.mark.parametrize("index", INDEXES)
def test_every_vector_change_is_logged(db_path: Path, index: str) -> None:
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=index) as mem:
        mem.store_many(messages(10))
        mem.store_note("memory:u", "n1", "a note")
        vectors = count(mem, "chunks_vec")
        assert count(mem, "chunks_vec_changes") == vectors  # one row per insert
        mem.forget("memory:u")
        assert count(mem, "chunks_vec_changes") == vectors + 1  # and per delete


@pytest.mark.parametrize("index", INDEXES)
def test_another_process_backfilling_below_the_newest_id_is_seen(db_path: Path, index: str) -> None:
    with open_store(db_path, vector_index=index) as reader, open_store(db_path) as worker:
        reader.store_many(messages(6))
        # The note's job runs first: its vector has the newest chunk id...
        reader.store_note("memory:u", "n1", "a note embedded first")
        embed_newest(reader)
        assert held(reader) == 1
        # ...so the jobs' vectors, written by another connection, are all below it.
        assert worker.run_jobs().succeeded == 6
        assert count(reader, "chunks_vec_changes") == 7  # the note's vector and the 6
        assert held(reader) == 7
        for _, _, text in messages(6):
            assert nearest(reader, text) == (text, pytest.approx(1.0))


@pytest.mark.parametrize("index", INDEXES)
def test_same_process_out_of_order_batches(db_path: Path, index: str) -> None:
    with open_store(db_path, vector_index=index) as mem:
        mem.store_many(messages(9))
        assert held(mem) == 0
        # Process the newest jobs first: later batches are all below the highest id held.
        mem.db.execute(
            "UPDATE memory_jobs SET next_retry_at = '0' || next_retry_at WHERE job_id > 6"
        )
        assert mem.run_jobs(max_jobs=3).succeeded == 3
        assert held(mem) == 3
        assert mem.run_jobs().succeeded == 6
        assert held(mem) == 9
        for _, _, text in messages(9):
            assert nearest(mem, text) == (text, pytest.approx(1.0))


@pytest.mark.parametrize("index", INDEXES)
def test_rewritten_vectors_are_reloaded(db_path: Path, index: str) -> None:
    with open_store(db_path, vector_index=index) as reader, open_store(db_path) as writer:
        reader.store_many(messages(3))
        reader.run_jobs()
        assert nearest(reader, "note 2 about topic2 and keyword2")[0].startswith("note 2")
        # Another connection rewrites chunk 2's vector in place (as a re-embed would).
        vector = writer.embedder.embed_documents(["something else entirely"])[0]
        writer.db.execute(
            "UPDATE chunks_vec SET embedding_blob = ? WHERE chunk_rowid = 2", (to_blob(vector),)
        )
        text, similarity = nearest(reader, "something else entirely")
        assert text.startswith("note 2") and similarity == pytest.approx(1.0)


@pytest.mark.parametrize("index", INDEXES)
def test_a_pruned_change_log_makes_a_stale_index_rebuild(
    db_path: Path, index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue, "CHANGE_LOG_KEEP", 2)
    with open_store(db_path, vector_index=index) as reader, open_store(db_path) as worker:
        reader.store_many(messages(8))
        reader.store_note("memory:u", "n1", "newest id")
        embed_newest(reader)
        assert held(reader) == 1
        worker.run_jobs(batch_size=2)
        oldest = int(worker.db.scalar("SELECT min(seq) FROM chunks_vec_changes"))
        assert count(worker, "chunks_vec_changes") <= 3 and oldest > 1  # pruned
        assert held(reader) == 9
        for _, _, text in messages(8):
            assert nearest(reader, text) == (text, pytest.approx(1.0))


def test_deleted_and_backfilled_in_one_gap_is_still_exact(db_path: Path) -> None:
    # A deletion and an out-of-order insert between two catch-ups leave the count equal.
    with open_store(db_path) as reader, open_store(db_path) as worker:
        reader.store_many(messages(4))
        reader.store_note("memory:u", "n1", "newest id")
        embed_newest(reader)
        assert held(reader) == 1
        worker.run_jobs(max_jobs=1)  # the vector of chunk 1, below the note's id
        worker.delete_note("memory:u", "n1")  # and the note's vector goes
        assert held(reader) == 1
        assert held_ids(reader) == [1]
        assert nearest(reader, "note 1 about topic1 and keyword1")[1] == pytest.approx(1.0)


def test_backfill_after_the_highest_vector_was_deleted_is_seen(db_path: Path) -> None:
    # The reader holds the note's vector (the highest id); the note is deleted, then a job
    # writes a vector below it. That vector is the highest *remaining* one, yet below ids
    # the reader has seen: it must still be logged (the trigger compares with the highest
    # chunk id ever allocated, not with the highest vector left).
    with open_store(db_path) as reader, open_store(db_path) as worker:
        reader.store_many(messages(2))
        reader.store_note("memory:u", "n1", "newest id")
        embed_newest(reader)
        assert held(reader) == 1
        worker.delete_note("memory:u", "n1")
        worker.run_jobs(max_jobs=1)
        assert held(reader) == 1
        assert held_ids(reader) == [1]
