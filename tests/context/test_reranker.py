"""A configured reranker in build_context: it decides which of the hybrid ranking's best
memories the budget admits, as in search; a failure keeps the fused order."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import mindfile
from mindfile.context import Context, ContextConfig

TRIPS = [
    f"On trip {i} I visited {city} and took the {mode} there."
    for i, (city, mode) in enumerate(
        (c, m) for c in ("Lisbon", "Porto", "Madrid", "Rome") for m in ("train", "bus", "ferry")
    )
]


class Prefers:
    """Scores 10 for texts naming ``word``, 0 otherwise; records what it was asked."""

    def __init__(self, word: str) -> None:
        self.word = word
        self.asked: list[list[str]] = []

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.asked.append(list(texts))
        return [10.0 if self.word in t else 0.0 for t in texts]


class Fails:
    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        raise RuntimeError("model offline")


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[mindfile.Mindfile]:
    with mindfile.open(tmp_path / "m.db", lexical_index="fts5") as store:
        store.store_many(
            [(f"trip-{i % 3}", i, text) for i, text in enumerate(TRIPS)], user_id="maya"
        )
        yield store


def memories(ctx: Context) -> list[str]:
    return [i.text for i in ctx.items if i.source == "memory"]


def context(mem: mindfile.Mindfile, **cfg: object) -> Context:
    config = ContextConfig(max_memories=2, **cfg)  # type: ignore[arg-type]
    return mem.build_context(
        "now", "Which trips went by train?", token_budget=2000, user_id="maya", config=config
    )


def test_the_reranker_decides_what_the_budget_admits(mem: mindfile.Mindfile) -> None:
    plain = context(mem)
    assert plain.degraded is None
    assert memories(plain) and not any("ferry" in t for t in memories(plain))
    ranker = Prefers("ferry")
    mem.reranker = ranker
    ctx = context(mem)
    assert ctx.degraded is None
    assert len(ranker.asked) == 1 and len(ranker.asked[0]) >= 2
    got = memories(ctx)
    assert len(got) == 2 and all("ferry" in t for t in got)
    # per build: off, and the fused order is back
    assert memories(context(mem, rerank=False)) == memories(plain)
    assert len(ranker.asked) == 1
    assert ContextConfig().to_dict()["rerank"] is True


def test_a_failing_reranker_keeps_the_fused_order(mem: mindfile.Mindfile) -> None:
    plain = memories(context(mem))
    mem.reranker = Fails()
    ctx = context(mem)
    assert memories(ctx) == plain
    assert ctx.degraded == "rerank unavailable: model offline"


def test_not_called_inside_the_callers_transaction(mem: mindfile.Mindfile) -> None:
    ranker = Prefers("ferry")
    mem.reranker = ranker
    with mem.db.atomic():
        ctx = context(mem)
    assert ranker.asked == []
    assert ctx.degraded == "rerank skipped inside a transaction"


def test_rerank_must_be_a_bool() -> None:
    with pytest.raises(mindfile.ConfigError):
        ContextConfig(rerank="yes")  # type: ignore[arg-type]
