"""The hybrid leg: search's ranking in the context, as many memories as the budget holds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import mindfile
from mindfile.context import Context, ContextConfig

TRIPS = [
    f"On trip {i} I visited {city} and took the {mode} there."
    for i, (city, mode) in enumerate(
        (c, m)
        for c in ("Lisbon", "Porto", "Madrid", "Seville", "Rome", "Milan", "Vienna", "Prague")
        for m in ("train", "bus", "ferry", "night train", "plane", "car")
    )
]


@pytest.fixture
def mem(store_location: str) -> Iterator[mindfile.Mindfile]:
    """On both backends (tests/conftest.py)."""
    with mindfile.open(store_location) as store:
        store.store_many(
            [(f"trip-{i % 6}", i, text) for i, text in enumerate(TRIPS)], user_id="maya"
        )
        store.store_note("memory:maya", "pets", "Maya has a grey cat called Olive.")
        yield store


def memories(ctx: Context) -> list[str]:
    return [i.text for i in ctx.items if i.source in ("memory", "salient")]


def context(mem: mindfile.Mindfile, query: str, budget: int, **cfg: object) -> Context:
    config = ContextConfig(**cfg)  # type: ignore[arg-type]
    return mem.build_context("now", query, token_budget=budget, user_id="maya", config=config)


def test_the_number_of_memories_follows_the_budget(mem: mindfile.Mindfile) -> None:
    query = "Which cities did I visit by train?"
    small, large = context(mem, query, 300), context(mem, query, 3000)
    assert 0 < len(memories(small)) < len(memories(large))
    assert len(memories(large)) > 8  # not the seed's fixed cap
    for ctx in (small, large):
        assert ctx.tokens <= ctx.budget
    seed = context(mem, query, 3000, hybrid=False, max_memories=8)
    assert len(memories(seed)) <= 8
    capped = context(mem, query, 3000, max_memories=5)
    assert len(memories(capped)) <= 5


def test_memories_come_in_searchs_order(mem: mindfile.Mindfile) -> None:
    query = "the ferry to Seville"
    ctx = context(mem, query, 400)
    top = mem.search(query, top_k=3, user_id="maya")
    assert memories(ctx)[0] == top[0].text
    first = next(i for i in ctx.items if i.source == "memory")
    assert first.explain["relevance"] == pytest.approx(top[0].score)
    assert "relevance" in first.reason and "search's ranking" in first.reason
    # Same age and importance: the fused relevance alone orders the memories.
    rels = [i.explain["relevance"] for i in ctx.items if i.source == "memory"]
    assert len(rels) > 3 and rels == sorted(rels, reverse=True)


def test_an_unrelated_memory_stays_out_below_the_floor(mem: mindfile.Mindfile) -> None:
    query = "Which trips did I take by night train?"
    assert not any("Olive" in t for t in memories(context(mem, query, 4000)))
    # Without the floor the nearest memories all come in, related or not.
    loose = memories(context(mem, query, 4000, hybrid_floor=-1.0))
    assert any("Olive" in t for t in loose)
    # A BM25 match enters whatever its cosine.
    assert any("Olive" in t for t in memories(context(mem, "Olive", 4000)))
