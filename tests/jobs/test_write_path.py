"""Background mode's write path: no embedder call, and event + chunks + FTS + jobs atomic."""

from __future__ import annotations

from pathlib import Path

import pytest
from backends import raw
from core._support import fts_rows

import mindfile
from mindfile.errors import ConfigError, ConflictError, MindfileError

from ._support import ControlledEmbedder, count, messages, open_store, status_counts


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


def test_store_does_not_call_the_embedder(db_path: Path) -> None:
    embedder = ControlledEmbedder(down=True)  # would raise if called
    with open_store(db_path, embedder) as mem:
        added = mem.store("s1", 1, {"role": "user", "content": "I moved to Lisbon in May."})
        assert added == 1
        assert embedder.calls == [] and embedder.query_calls == 0
        assert count(mem, "conversation_events") == 1
        assert count(mem, "chunks") == 1
        assert fts_rows(mem) == 1
        assert count(mem, "chunks_vec") == 0
        assert status_counts(mem) == {"pending": 1}
        rowid = raw(mem).scalar("SELECT id FROM chunks")
        assert raw(mem).scalar("SELECT chunk_rowid FROM memory_jobs") == rowid


def test_store_many_enqueues_one_job_per_new_chunk(db_path: Path) -> None:
    embedder = ControlledEmbedder(down=True)
    with open_store(db_path, embedder) as mem:
        added = mem.store_many(messages(5))
        # A repeated text extends its existing chunk: no second chunk, no second job.
        added += mem.store_many([("s1", 6, "note 1 about topic1 and keyword1")])
        assert added == 5
        assert embedder.calls == []
        assert status_counts(mem) == {"pending": 5}
        assert count(mem, "memory_jobs") == count(mem, "chunks") == 5


@pytest.mark.sqlite_only("a SQLite trigger makes the insert fail")
def test_a_failing_job_insert_writes_nothing(db_path: Path) -> None:
    with open_store(db_path) as mem:
        mem.store("s0", 1, "an earlier event that stays")
        raw(mem).execute(
            "CREATE TRIGGER refuse_jobs BEFORE INSERT ON memory_jobs "
            "BEGIN SELECT RAISE(ABORT, 'job queue refused'); END"
        )
        before = {t: count(mem, t) for t in ("sessions", "conversation_events", "chunks")}
        before["fts"] = count(mem, "chunks_fts_docsize")
        with pytest.raises(MindfileError, match="job queue refused"):
            mem.store_many([("s1", 1, "first new event"), ("s1", 2, "second new event")])
        after = {t: count(mem, t) for t in ("sessions", "conversation_events", "chunks")}
        after["fts"] = count(mem, "chunks_fts_docsize")
        assert after == before
        assert count(mem, "memory_jobs") == 1
        assert mem.search("second", mode="fts") == []


def test_a_stale_sequence_rolls_back_the_jobs_too(db_path: Path) -> None:
    with open_store(db_path) as mem:
        mem.store("s1", 5, "five")
        with pytest.raises(ConflictError):
            mem.store_many([("s1", 6, "six"), ("s1", 3, "three is stale")])
        assert count(mem, "memory_jobs") == 1
        assert count(mem, "chunks") == 1


def test_vectors_are_the_same_as_sync_mode(tmp_path: Path) -> None:
    events = messages(12)
    with mindfile.open(tmp_path / "sync.db", embedder="hash:16") as sync:
        sync.store_many(events)
        expected = sync.db.query(
            "SELECT chunk_id, embedding_blob, embedding_model FROM chunks "
            "JOIN chunks_vec ON chunk_rowid = id ORDER BY chunk_id"
        )
        assert count(sync, "memory_jobs") == 0  # sync mode never queues
    with open_store(tmp_path / "bg.db") as bg:
        bg.store_many(events)
        report = bg.run_jobs(batch_size=5)
        assert (report.claimed, report.succeeded, report.batches) == (12, 12, 3)
        got = bg.db.query(
            "SELECT chunk_id, embedding_blob, embedding_model FROM chunks "
            "JOIN chunks_vec ON chunk_rowid = id ORDER BY chunk_id"
        )
        assert got == expected
        assert status_counts(bg) == {"done": 12}
        target = events[6][2]
        query = bg.embedder.embed_documents([target])[0]
        hits = bg.search("x", mode="vector", top_k=1, query_embedding=query.tolist())
        assert [h.text for h in hits] == [target]


def test_forgetting_a_session_deletes_its_jobs(db_path: Path) -> None:
    with open_store(db_path) as mem:
        mem.store_many(messages(3))
        mem.store("s2", 1, "another session")
        assert mem.forget("s1")
        assert count(mem, "memory_jobs") == 1
        assert mem.run_jobs().succeeded == 1


def test_every_writer_queues_in_background_mode(db_path: Path) -> None:
    # One pipeline: notes, facts and consolidation summaries queue jobs like store does,
    # so no writer of a background store ever waits for (or fails with) the embedder.
    embedder = ControlledEmbedder()
    with open_store(db_path, embedder) as mem:
        mem.store_note("memory:u1", "n1", "prefers green tea")
        mem.set_fact("u1", "drink", "favourite", "green tea")
        mem.store_many([("s1", i, f"long chat line {i} about tea") for i in range(1, 5)])
        mem.consolidate(session_id="s1", older_than=0, similarity=None)
        assert embedder.calls == []
        assert count(mem, "chunks_vec") == 0
        queued = count(mem, "memory_jobs")
        assert queued == count(mem, "chunks") > 6
        # Searchable on return by full text; by meaning once the worker ran.
        assert mem.search_notes("memory:u1", "green tea")[0].text == "prefers green tea"
        assert mem.run_jobs().succeeded == queued
        assert count(mem, "chunks_vec") == queued
        hits = mem.search("green tea", mode="vector", session_id="memory:u1")
        assert hits[0].text == "prefers green tea"


@pytest.mark.sqlite_only("checks that no file was created")
def test_unknown_indexing_mode_is_a_config_error(db_path: Path) -> None:
    with pytest.raises(ConfigError, match="indexing"):
        mindfile.open(db_path, embedder="hash", indexing="later")  # type: ignore[arg-type]
    assert not Path(db_path).exists()


def test_background_mode_is_per_open_not_per_store(db_path: Path) -> None:
    with open_store(db_path) as bg:
        bg.store("s1", 1, "queued while in background mode")
    with mindfile.open(db_path, embedder="hash:16") as sync:
        sync.store("s1", 2, "embedded at once in sync mode")
        assert status_counts(sync) == {"pending": 1}
        assert count(sync, "chunks_vec") == 1
        assert sync.run_jobs().succeeded == 1
        assert count(sync, "chunks_vec") == 2


def test_the_jobs_module_is_documented_and_typed() -> None:
    import inspect

    import mindfile.jobs

    assert mindfile.jobs.__doc__
    for name in mindfile.jobs.__all__:
        value = getattr(mindfile.jobs, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), name
    for method in (
        "run_jobs",
        "job_status",
        "list_jobs",
        "retry_failed_jobs",
        "prune_jobs",
        "reconcile",
    ):
        assert inspect.getdoc(getattr(mindfile.Mindfile, method)), method


def test_the_module_example_runs() -> None:
    import doctest

    import mindfile.jobs

    result = doctest.testmod(mindfile.jobs)
    assert result.attempted > 0 and result.failed == 0
