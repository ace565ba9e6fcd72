"""Asking for more results never changes the best ones (issue 16, part 2).

For every mode and fusion, with and without filters, ``search(q, top_k=a)`` is a prefix
of ``search(q, top_k=b)`` for ``a <= b``, and a chunk's score is the same in both.
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

import mindfile

VOCAB = ["lisbon", "porto", "hike", "dog", "sister", "peanut", "train", "book", "rain", "tea"]

texts = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=6).map(" ".join)
events = st.lists(
    st.tuples(st.sampled_from(["s1", "s2", "s3"]), texts, st.booleans(), st.booleans()),
    min_size=1,
    max_size=40,
)
queries = st.lists(st.sampled_from([*VOCAB, "zebra"]), min_size=1, max_size=3).map(" ".join)


def _store(evts: list[tuple[str, str, bool, bool]], lexical: str) -> mindfile.Mindfile:
    mem = mindfile.open(":memory:", embedder="hash", lexical_index=lexical)  # type: ignore[arg-type]
    seqs: dict[str, int] = {}
    for session, text, tagged, expired in evts:
        seqs[session] = seqs.get(session, 0) + 1
        mem.store(
            session,
            seqs[session],
            text,
            tags=["t"] if tagged else None,
            ttl=timedelta(microseconds=1) if expired else None,
        )
    # Built now, not in the background during the searches: while it builds, FTS5
    # ranks, and its float scores may differ from the index's in the last bits.
    mem.rebuild_index()
    return mem


def _key(results: mindfile.SearchResults) -> list[tuple[str, float]]:
    return [(h.chunk_id, h.score) for h in results]


@settings(max_examples=60)
@given(
    evts=events,
    query=queries,
    a=st.integers(1, 30),
    extra=st.integers(0, 60),
    candidates=st.sampled_from([1, 3, 8, 50]),
    mode=st.sampled_from(["vector", "fts", "hybrid"]),
    fusion=st.sampled_from(["weighted", "rrf"]),
    scope=st.sampled_from(["none", "tags", "session"]),
    min_score=st.sampled_from([None, 0.0, 0.3]),
    lexical=st.sampled_from(["memory", "fts5"]),
)
def test_top_a_is_a_prefix_of_top_b(
    evts: list[tuple[str, str, bool, bool]],
    query: str,
    a: int,
    extra: int,
    candidates: int,
    mode: str,
    fusion: str,
    scope: str,
    min_score: float | None,
    lexical: str,
) -> None:
    with _store(evts, lexical) as mem:
        kwargs: dict[str, object] = {
            "mode": mode,
            "fusion": fusion,
            "candidates": candidates,
            "min_score": min_score,
        }
        if scope == "tags":
            kwargs["tags"] = ["t"]
        elif scope == "session":
            kwargs["session_id"] = ["s1", "s3"]
        small = mem.search(query, top_k=a, **kwargs)  # type: ignore[arg-type]
        large = mem.search(query, top_k=a + extra, **kwargs)  # type: ignore[arg-type]
        assert _key(small) == _key(large)[: len(small)]
        assert len(small) == min(a, len(large))
        # Same chunk, same score, whatever top_k; scores never increase down the list.
        scores = [h.score for h in large]
        assert scores == sorted(scores, reverse=True)


def test_the_issue_example_holds_on_a_real_model(mem_static: mindfile.Mindfile) -> None:
    turns = [
        "I moved to Lisbon in May",
        "My sister Ines lives in Porto",
        "We hiked in Sintra with the dog",
        "The quarterly review is next week",
        "I'm allergic to peanuts",
        "Pixel the dog loves the beach",
    ] * 10
    mem_static.store_many([("c", i, f"{t} ({i})") for i, t in enumerate(turns, 1)])
    mem_static.rebuild_index()
    for q in ("where do I live?", "dog beach", "what food must I avoid?"):
        top10 = mem_static.search(q, top_k=10)
        top50 = mem_static.search(q, top_k=50)
        assert _key(top10) == _key(top50)[:10]
