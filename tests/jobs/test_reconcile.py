"""The reconciler finds and repairs chunk / vector / index mismatches made by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from backends import is_postgres, raw

import mindfile
from mindfile.embed.base import to_blob
from mindfile.jobs import JobPolicy

from ._support import DIMS, ControlledEmbedder, count, messages, open_store, status_counts


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


def sync_store(path: Path, **kwargs: object) -> mindfile.Mindfile:
    return mindfile.open(path, embedder=f"hash:{DIMS}", **kwargs)  # type: ignore[arg-type]


def vectors(mem: mindfile.Mindfile) -> list[tuple[int, bytes, str]]:
    """Every stored vector as ``(chunk_rowid, float32 bytes, model)`` (either backend)."""
    column = "embedding::real[]" if is_postgres(mem) else "embedding_blob"
    return [
        (
            int(r),
            to_blob(np.asarray(b, dtype=np.float32)) if isinstance(b, list) else bytes(b),
            str(m),
        )
        for r, b, m in raw(mem).query(
            f"SELECT chunk_rowid, {column}, embedding_model FROM chunks_vec ORDER BY chunk_rowid"
        )
    ]


def test_a_healthy_store_is_consistent(db_path: Path) -> None:
    with sync_store(db_path) as mem:
        mem.store_many(messages(5))
        report = mem.reconcile()
        assert report.consistent
        assert (report.chunks, report.vector_count, report.index_size, report.fts_rows) == (
            5,
            5,
            5,
            5,
        )
        assert report.enqueued == 0 and not report.index_rebuilt and not report.fts_rebuilt
        assert report.to_dict()["consistent"] is True


def test_deleted_vectors_are_found_and_reembedded(db_path: Path) -> None:
    with sync_store(db_path) as mem:
        mem.store_many(messages(6))
        good = vectors(mem)
        raw(mem).execute("DELETE FROM chunks_vec WHERE chunk_rowid IN (2, 5)")

        check = mem.reconcile(repair=False)
        assert not check.consistent
        assert (check.missing_vectors, check.vector_count, check.index_size) == (2, 4, 4)
        assert check.enqueued == 0 and count(mem, "memory_jobs") == 0  # report only
        assert mem.search("topic2").degraded is None  # no jobs: search cannot tell

        fixed = mem.reconcile()
        assert (fixed.missing_vectors, fixed.enqueued, fixed.embedded) == (2, 2, 2)
        assert vectors(mem) == good
        assert mem.index.size() == 6
        assert status_counts(mem) == {"done": 2}
        assert mem.reconcile(repair=False).consistent


def test_background_stores_leave_repairs_to_the_worker(db_path: Path) -> None:
    with open_store(db_path) as mem:
        mem.store_many(messages(4))
        mem.run_jobs()
        raw(mem).execute("DELETE FROM chunks_vec WHERE chunk_rowid = 3")  # its job says done
        report = mem.reconcile()
        assert (report.missing_vectors, report.enqueued, report.embedded) == (1, 1, 0)
        assert status_counts(mem) == {"done": 3, "pending": 1}
        assert mem.search("topic3").degraded is not None  # and search says so
        assert mem.run_jobs().succeeded == 1
        assert mem.reconcile(repair=False).consistent


def test_live_and_dead_jobs_are_not_missing_vectors(db_path: Path) -> None:
    embedder = ControlledEmbedder(down=True)
    with open_store(db_path, embedder) as mem:
        mem.store_many(messages(4))
        mem.run_jobs(max_jobs=2, batch_size=2, policy=JobPolicy(max_retries=0))
        report = mem.reconcile()
        assert (report.missing_vectors, report.dead_lettered, report.enqueued) == (0, 2, 0)
        assert status_counts(mem) == {"failed": 2, "pending": 2}  # dead letters stay dead


@pytest.mark.sqlite_only("damages the store with SQLite-only SQL (blobs, FTS5, sqlite-vec)")
def test_wrong_model_and_wrong_size_vectors_are_replaced(db_path: Path) -> None:
    with sync_store(db_path) as mem:
        mem.store_many(messages(5))
        good = vectors(mem)
        odd = np.ones(DIMS, dtype=np.float32) / np.sqrt(DIMS)
        raw(mem).execute(
            "UPDATE chunks_vec SET embedding_model = 'some-other-model', embedding_blob = ? "
            "WHERE chunk_rowid = 2",
            (to_blob(odd),),
        )
        raw(mem).execute(
            "UPDATE chunks_vec SET embedding_blob = zeroblob(12) WHERE chunk_rowid = 5"
        )
        mem.index.invalidate()
        check = mem.reconcile(repair=False)
        assert check.wrong_model_vectors == 2
        assert check.index_size == -1  # not loadable until repaired
        fixed = mem.reconcile()
        assert (fixed.wrong_model_vectors, fixed.enqueued, fixed.embedded) == (2, 2, 2)
        assert vectors(mem) == good
        assert mem.index.size() == 5
        query = mem.embedder.embed_documents(["note 2 about topic2 and keyword2"])[0]
        hit = mem.search("x", mode="vector", top_k=1, query_embedding=query.tolist())[0]
        assert hit.sequence_start == 2 and hit.breakdown.vector == pytest.approx(1.0)


@pytest.mark.sqlite_only("damages the store with SQLite-only SQL (blobs, FTS5, sqlite-vec)")
def test_orphan_vectors_are_deleted(db_path: Path) -> None:
    with sync_store(db_path) as mem:
        mem.store_many(messages(3))
        raw(mem).execute("PRAGMA foreign_keys = OFF")
        raw(mem).execute("DELETE FROM chunks WHERE id = 2")  # its vector stays behind
        raw(mem).execute("PRAGMA foreign_keys = ON")
        report = mem.reconcile()
        assert report.orphan_vectors == 1
        assert [v[0] for v in vectors(mem)] == [1, 3]
        assert mem.index.size() == 2
        assert mem.reconcile(repair=False).consistent


@pytest.mark.sqlite_only("damages the store with SQLite-only SQL (blobs, FTS5, sqlite-vec)")
def test_a_broken_fts_index_is_rebuilt(db_path: Path) -> None:
    with sync_store(db_path) as mem:
        mem.store_many(messages(4))
        raw(mem).execute("DROP TRIGGER chunks_fts_ai")
        raw(mem).execute(
            "INSERT INTO chunks (chunk_id, session_id, chunk_text, content_hash, sequence_start, "
            "sequence_end, created_at) VALUES ('ch_x', 's1', 'unindexed zebra', 'h', 9, 9, 'now')"
        )
        zebra = "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'zebra'"
        assert raw(mem).scalar(zebra) == 0
        report = mem.reconcile()
        assert (report.fts_rows, report.chunks, report.fts_rebuilt) == (4, 5, True)
        assert report.missing_vectors == 1 and report.embedded == 1
        assert raw(mem).scalar(zebra) == 1
        assert mem.reconcile(repair=False).consistent


@pytest.mark.sqlite_only("damages the store with SQLite-only SQL (blobs, FTS5, sqlite-vec)")
def test_a_tampered_sqlite_vec_index_is_rebuilt(db_path: Path) -> None:
    with sync_store(db_path, vector_index="sqlite-vec") as mem:
        mem.store_many(messages(6))
        assert mem.index.size() == 6
        raw(mem).execute("DELETE FROM chunks_vec_index WHERE rowid IN (2, 3)")
        mem.index.invalidate()
        report = mem.reconcile()
        assert (report.vector_count, report.index_size, report.index_rebuilt) == (6, 4, True)
        assert mem.index.size() == 6
        assert mem.reconcile(repair=False).consistent


def test_reconcile_checks_and_repairs_the_bm25_index(tmp_path: Path) -> None:
    with mindfile.open(tmp_path / "m.db", embedder="hash") as mem:
        mem.store_many([("s", i, f"message {i} about lakes") for i in range(1, 6)])
        report = mem.reconcile(repair=False)
        assert report.lexical_size == report.chunks == 5 and report.consistent
        assert mem.lexical is not None
        state = mem.lexical._state
        state.remove(int(raw(mem).scalar("SELECT min(id) FROM chunks")))  # corrupt it
        state.data_version = mem.db.change_token()  # and make it look current
        mem.lexical._dirty = False
        broken = mem.reconcile(repair=True)
        assert broken.lexical_size == 4 and not broken.consistent and broken.lexical_rebuilt
        assert mem.reconcile(repair=False).consistent
        assert len(mem.lexical.search("lakes", 10)) == 5
