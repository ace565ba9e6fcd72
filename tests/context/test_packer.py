"""pack_hits: ranked hits into a token budget, skipping what does not fit."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mindfile.context import HIT_OVERHEAD, pack_hits
from mindfile.errors import InvalidInputError
from mindfile.tokens import estimate_tokens
from mindfile.types import ScoreBreakdown, SearchHit


def hit(text: str, i: int = 0) -> SearchHit:
    return SearchHit(
        chunk_id=f"ch_{i}",
        session_id="s",
        text=text,
        sequence_start=i,
        sequence_end=i,
        metadata={},
        score=1.0 / (i + 1),
        breakdown=ScoreBreakdown(None, None, 0.0, 0.0, 0.0),
    )


def test_skips_what_does_not_fit_and_continues() -> None:
    hits = [hit("x" * 40, 0), hit("y" * 400, 1), hit("z" * 20, 2)]  # 10+4, 100+4, 5+4
    kept = pack_hits(hits, 30)
    assert [h.chunk_id for h in kept] == ["ch_0", "ch_2"]
    assert pack_hits(hits, 13) == [hits[2]]  # the first does not fit either
    assert pack_hits(hits, 200) == hits
    assert pack_hits([], 10) == []
    assert pack_hits(hits, 0) == []


def test_counter_and_overhead_are_pluggable() -> None:
    hits = [hit("one two three", 0), hit("four", 1)]
    words = lambda s: len(s.split())  # noqa: E731
    assert pack_hits(hits, 4, token_counter=words, overhead=0) == hits
    assert pack_hits(hits, 4, token_counter=words, overhead=1) == [hits[0]]
    assert HIT_OVERHEAD == 4


@given(
    texts=st.lists(st.text(max_size=300), max_size=30),
    budget=st.integers(min_value=0, max_value=600),
)
def test_never_over_budget_and_order_kept(texts: list[str], budget: int) -> None:
    hits = [hit(t, i) for i, t in enumerate(texts)]
    kept = pack_hits(hits, budget)
    cost = [estimate_tokens(h.text) + HIT_OVERHEAD for h in kept]
    assert sum(cost) <= budget
    ids = [h.chunk_id for h in kept]
    assert ids == sorted(ids, key=lambda c: int(c[3:]))
    # Greedy: every skipped hit would not have fitted when it was considered.
    used = 0
    for h in hits:
        c = estimate_tokens(h.text) + HIT_OVERHEAD
        if h in kept:
            used += c
        else:
            assert used + c > budget


@pytest.mark.parametrize(
    "kwargs",
    [
        {"token_budget": -1},
        {"token_budget": 1.5},
        {"token_budget": True},
        {"token_budget": 5, "overhead": -1},
    ],
)
def test_bad_arguments_are_invalid_input(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        pack_hits([hit("a")], **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        pack_hits([hit("a")], 5, token_counter="nope")  # type: ignore[arg-type]
