"""Search while vectors are missing: nothing is lost, and ``degraded`` says why."""

from __future__ import annotations

from pathlib import Path

import pytest
from backends import raw

import mindfile
from mindfile.jobs import JobPolicy
from mindfile.retrieve.degraded import RECENCY_WEIGHT, recency_fusion

from ._support import DIMS, ControlledEmbedder, messages, open_store


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


def test_pending_chunks_are_findable_by_full_text(db_path: Path) -> None:
    with open_store(db_path) as mem:
        mem.store_many(messages(12))
        results = mem.search("topic5")
        assert results.mode == "hybrid"
        assert results.degraded == (
            "12 chunks awaiting embeddings (12 queued); such chunks are matched by full text only"
        )
        assert results[0].text == "note 5 about topic5 and keyword2"
        assert results[0].breakdown.vector is None
        assert mem.run_jobs().succeeded == 12
        after = mem.search("topic5")
        assert after.degraded is None and after.mode == "hybrid"
        assert "note 5 about topic5 and keyword2" in [h.text for h in after]


def test_an_unembedded_chunk_competes_with_embedded_ones(db_path: Path) -> None:
    with open_store(db_path) as mem:
        # 40 embedded chunks fill the vector leg's candidate pool with partial scores...
        mem.store_many(messages(40, prefix="filler"))
        mem.run_jobs()
        # ...and the one that really matches is still waiting for its vector.
        mem.store("s2", 1, "the wifi password is hunter2")
        for fusion in ("weighted", "rrf"):
            results = mem.search("wifi password", top_k=3, fusion=fusion)  # type: ignore[arg-type]
            assert results.degraded is not None and "1 chunk awaiting" in results.degraded
            top = results[0]
            assert top.text == "the wifi password is hunter2", fusion
            assert top.breakdown.vector is None
            if fusion == "weighted":  # full-text leg alone, weights renormalised: 0.7 + 0.3
                assert top.score == pytest.approx(1.0)


def test_vector_mode_says_what_it_cannot_see(db_path: Path) -> None:
    with open_store(db_path) as mem:
        mem.store_many(messages(3))
        results = mem.search("topic1", mode="vector")
        assert results == [] and results.mode == "vector"
        assert results.degraded is not None and "3 chunks awaiting" in results.degraded


def test_full_text_mode_is_never_degraded(db_path: Path) -> None:
    with open_store(db_path) as mem:
        mem.store_many(messages(3))
        results = mem.search("topic1", mode="fts")
        assert results.degraded is None and results.mode == "fts"


def test_embedder_down_falls_back_to_full_text_fused_with_recency(db_path: Path) -> None:
    embedder = ControlledEmbedder()
    with mindfile.open(db_path, embedder=embedder, neighbor_context=False) as mem:
        # Same words, so BM25 cannot tell them apart: recency decides.
        mem.store_many([("s1", i, f"deploy the billing service step {i}") for i in range(1, 6)])
        embedder.down = True
        results = mem.search("billing service")
        assert results.mode == "fts"
        assert results.degraded is not None
        assert results.degraded.startswith("vector search unavailable:")
        assert "unreachable" in results.degraded
        assert [h.sequence_start for h in results] == [5, 4, 3, 2, 1]
        assert results[0].score == pytest.approx(1.0)
        assert results[-1].score == pytest.approx(1.0 - RECENCY_WEIGHT)


def test_embedder_down_with_a_backlog_reports_both(db_path: Path) -> None:
    embedder = ControlledEmbedder(down=True)
    with open_store(db_path, embedder) as mem:
        mem.store_many(messages(4))
        mem.run_jobs(policy=JobPolicy(max_retries=0), batch_size=2, max_jobs=2)
        results = mem.search("topic2")
        assert results.mode == "fts"
        assert results.degraded is not None
        assert "vector search unavailable" in results.degraded
        assert "4 chunks awaiting embeddings (2 queued, 2 failed)" in results.degraded
        assert results[0].text == "note 2 about topic2 and keyword2"


def test_a_strong_text_match_still_beats_recency(db_path: Path) -> None:
    embedder = ControlledEmbedder()
    with mindfile.open(db_path, embedder=embedder) as mem:
        mem.store("s1", 1, "the invoice number for the cloud bill is 4471")
        for i in range(2, 12):
            mem.store("s1", i, f"cloud chat {i}")
        embedder.down = True
        results = mem.search("invoice number cloud bill")
        assert results[0].sequence_start == 1


def test_recency_fusion_by_hand() -> None:
    fused = recency_fusion([(3, 10.0), (7, 5.0), (5, 0.0)], weight=0.5)
    # fts_norm: 3 -> 1.0, 7 -> 0.5, 5 -> 0.0; recency by id: 7 -> 1, 5 -> 0.5, 3 -> 0.
    assert {r: f.score for r, f in fused.items()} == pytest.approx({3: 0.5, 7: 0.75, 5: 0.25})
    assert recency_fusion([(1, 2.0)])[1].score == pytest.approx(1.0)
    assert recency_fusion([]) == {}


@pytest.mark.sqlite_only("EXPLAIN QUERY PLAN is SQLite's")
def test_the_backlog_check_is_one_cheap_query(db_path: Path) -> None:
    with mindfile.open(db_path, embedder=f"hash:{DIMS}") as mem:
        mem.store_many(messages(5))
        plan = raw(mem).query(
            "EXPLAIN QUERY PLAN SELECT EXISTS (SELECT 1 FROM memory_jobs "
            "WHERE status IN ('pending', 'running', 'failed'))"
        )
        assert any("idx_jobs_status_next" in str(row[-1]) for row in plan), plan
        assert mem.search("topic1").degraded is None


def test_backlog_counts_are_capped(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mindfile.retrieve import degraded

    monkeypatch.setattr(degraded, "BACKLOG_COUNT_CAP", 3)
    with open_store(db_path, ControlledEmbedder(down=True)) as mem:
        mem.store_many(messages(5))
        assert degraded.backlog_note(mem.db) == (
            "3+ chunks awaiting embeddings (3+ queued); such chunks are matched by full text only"
        )
        mem.run_jobs(policy=JobPolicy(max_retries=0), batch_size=2, max_jobs=2)
        note = degraded.backlog_note(mem.db)
        assert note is not None and note.startswith(
            "5+ chunks awaiting embeddings (3+ queued, 2 failed)"
        )
