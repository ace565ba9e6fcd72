"""The optional reranker seam (mindfile.retrieve.reranker): a configured reranker orders
a search's first 50 hits, never fails the search, and keeps ``top_k`` a prefix."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import mindfile
from mindfile.errors import ConfigError, InvalidInputError
from mindfile.retrieve.reranker import RERANK_DEPTH

from ._support import in_threads

TEXTS = [f"note {i}: the garden needs water on day {i}" for i in range(70)]


class ByNumber:
    """Scores a text by the number after "note" (highest first), recording its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.calls.append((query, list(texts)))
        return [float(t.split(":")[0].split()[1]) for t in texts]


class Broken:
    def __init__(self, answer: object) -> None:
        self.answer = answer

    def score(self, query: str, texts: Sequence[str]) -> object:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[mindfile.Mindfile]:
    # BM25 by FTS5: the same scores from the first search on (the in-memory index may
    # still be building at the first one, and its scores agree only to ~1e-6).
    with mindfile.open(tmp_path / "m.db", embedder="hash", lexical_index="fts5") as m:
        m.store_many([("garden", i, text) for i, text in enumerate(TEXTS)])
        yield m


def test_no_reranker_by_default(mem: mindfile.Mindfile) -> None:
    assert mem.reranker is None
    hits = mem.search("garden water", top_k=5)
    assert hits.degraded is None
    assert all(h.breakdown.rerank is None for h in hits)


def test_the_first_fifty_hits_come_in_the_rerankers_order(mem: mindfile.Mindfile) -> None:
    fused = mem.search("garden water", top_k=70)
    ranker = ByNumber()
    mem.reranker = ranker
    hits = mem.search("garden water", top_k=70)
    assert len(ranker.calls) == 1
    query, texts = ranker.calls[0]
    assert query == "garden water"
    assert texts == [h.text for h in fused[:RERANK_DEPTH]]  # the fused first 50, in order
    numbers = [int(h.text.split(":")[0].split()[1]) for h in hits[:RERANK_DEPTH]]
    assert numbers == sorted(numbers, reverse=True)
    assert [h.breakdown.rerank for h in hits[:RERANK_DEPTH]] == [float(n) for n in numbers]
    # the hits after the first 50: fused order, no rerank score; scores stay the fused ones
    assert [h.chunk_id for h in hits[RERANK_DEPTH:]] == [h.chunk_id for h in fused[50:]]
    assert all(h.breakdown.rerank is None for h in hits[RERANK_DEPTH:])
    by_id = {h.chunk_id: h for h in fused}
    assert [h.score for h in hits] == [by_id[h.chunk_id].score for h in hits]
    assert all(h.breakdown.fused == h.score for h in hits)
    assert hits.degraded is None


def test_top_k_stays_a_prefix_with_a_reranker(mem: mindfile.Mindfile) -> None:
    mem.reranker = ByNumber()
    full = [h.chunk_id for h in mem.search("garden water", top_k=70)]
    for k in (1, 5, 10, 49, 50, 51):
        assert [h.chunk_id for h in mem.search("garden water", top_k=k)] == full[:k]


def test_per_call_off_and_another_reranker(mem: mindfile.Mindfile) -> None:
    ranker = ByNumber()
    mem.reranker = ranker
    plain = mem.search("garden water", top_k=10, rerank=False)
    assert ranker.calls == [] and all(h.breakdown.rerank is None for h in plain)
    other = ByNumber()
    mem.search("garden water", top_k=10, rerank=other)
    assert len(other.calls) == 1 and ranker.calls == []


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (RuntimeError("model offline"), "model offline"),
        ([1.0, 2.0], "2 scores for 50 hits"),
        ([float("nan")] * 50, "not a finite number"),
        (["x"] * 50, "could not convert"),
        (None, "not iterable"),
    ],
)
def test_a_failing_reranker_keeps_the_fused_order(
    mem: mindfile.Mindfile, answer: object, why: str
) -> None:
    fused = mem.search("garden water", top_k=10)
    mem.reranker = Broken(answer)  # type: ignore[assignment]
    hits = mem.search("garden water", top_k=10)
    assert [h.chunk_id for h in hits] == [h.chunk_id for h in fused]
    assert hits.degraded is not None and hits.degraded.startswith("rerank unavailable")
    assert why in hits.degraded
    assert all(h.breakdown.rerank is None for h in hits)


def test_not_called_inside_the_callers_transaction(mem: mindfile.Mindfile) -> None:
    ranker = ByNumber()
    mem.reranker = ranker
    with mem.db.atomic():
        hits = mem.search("garden water", top_k=5)
    assert ranker.calls == []
    assert hits.degraded == "rerank skipped inside a transaction"
    assert len(hits) == 5


def test_bad_rerankers_are_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        mindfile.open(tmp_path / "x.db", embedder="hash", reranker="llm")  # type: ignore[arg-type]
    assert info.value.code == "config"
    with mindfile.open(tmp_path / "y.db", embedder="hash") as m:
        with pytest.raises(InvalidInputError):
            m.reranker = object()  # type: ignore[assignment]
        with pytest.raises(InvalidInputError):
            m.search("x", rerank="yes")  # type: ignore[arg-type]
        m.reranker = None
        assert m.search("x").degraded is None


def test_threads_share_a_reranker(mem: mindfile.Mindfile) -> None:
    mem.reranker = ByNumber()
    want = [h.chunk_id for h in mem.search("garden water", top_k=10)]
    assert len(want) == 10

    def ask() -> None:
        for _ in range(10):
            assert [h.chunk_id for h in mem.search("garden water", top_k=10)] == want

    in_threads(ask, 6)
