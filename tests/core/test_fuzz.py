"""Hostile input: search never crashes on text, bad types are invalid input, and the
store stays consistent whatever is thrown at ``store``."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mindfile
from mindfile.errors import InvalidInputError, MindfileError

from ._support import assert_consistent

FTS_SYNTAX = [
    '"',
    "'",
    "(",
    ")",
    "NEAR",
    "NEAR(",
    "NEAR/3",
    "AND",
    "OR",
    "NOT",
    "*",
    "^",
    "-",
    "+",
    ":",
    "chunk_text:",
    "chunks_fts:",
    "{chunk_text}:",
    "rowid:",
    "\\",
    "%",
    "_",
    ";",
    "--",
    "/*",
    "'; DROP TABLE chunks; --",
    "\x00",
    "\ud800",
    "\udfff",
    "🙂",
    "👩‍👩‍👧",
    "\u200b",
    "\ufeff",
    "東京",
    "lisbon",
    "milk",
]

words = st.one_of(st.sampled_from(FTS_SYNTAX), st.text(max_size=8))
huge = st.builds(
    lambda piece, n: (piece * (n // max(len(piece), 1) + 1))[:n],
    st.lists(words, min_size=1, max_size=5).map(" ".join).filter(bool),
    st.integers(1_000, 100_000),
)
queries = st.one_of(
    st.text(),
    st.lists(words, max_size=25).map(" ".join),
    st.lists(words, max_size=25).map("".join),
    huge,
)
modes = st.sampled_from(["hybrid", "vector", "fts"])
fusions = st.sampled_from(["weighted", "rrf"])
good_sessions = st.one_of(
    st.none(), st.sampled_from(["s0", "s1", "other"]), st.lists(st.sampled_from(["s0", "s1"]))
)
good_tags = st.one_of(st.none(), st.lists(st.sampled_from(["alpha", "beta", "Gamma "])))


def seed_store(mem: mindfile.Mindfile) -> None:
    texts = [
        "I moved to Lisbon in May.",
        'She said "NEAR" is an FTS5 operator (and so is AND).',
        "chunk_text: looks like a column filter",
        "Buy milk 🙂 and eggs",
        "東京 is Tokyo",
    ]
    for i, text in enumerate(texts):
        mem.store(f"s{i % 2}", i, text, tags=["alpha"] if i % 2 else ["alpha", "beta"])


def test_any_text_query_never_raises(mem: mindfile.Mindfile) -> None:
    seed_store(mem)

    @settings(max_examples=200)
    @given(
        query=queries,
        mode=modes,
        fusion=fusions,
        session_id=good_sessions,
        tags=good_tags,
        top_k=st.integers(1, 1000),
    )
    def run(query: str, mode: Any, fusion: Any, session_id: Any, tags: Any, top_k: int) -> None:
        results = mem.search(
            query, mode=mode, fusion=fusion, session_id=session_id, tags=tags, top_k=top_k
        )
        assert len(results) <= top_k
        assert results.degraded is None
        assert all(math.isfinite(h.score) for h in results)

    run()
    assert_consistent(mem)


def test_any_text_query_never_raises_with_the_static_model(mem_static: mindfile.Mindfile) -> None:
    seed_store(mem_static)

    @settings(max_examples=100)
    @given(query=queries, mode=modes)
    def run(query: str, mode: Any) -> None:
        results = mem_static.search(query, mode=mode)
        assert results.degraded is None

    run()


junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.binary(max_size=8),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.builds(object),
    st.just(float("nan")),
)


def wrong(valid: Any) -> st.SearchStrategy[Any]:
    """Junk, minus whatever ``valid`` accepts."""
    return junk.filter(lambda v: not _safe_call(valid, v))


def _safe_call(predicate: Any, value: Any) -> bool:
    try:
        return bool(predicate(value))
    except Exception:
        return False


def _is_id(v: Any) -> bool:
    return isinstance(v, str) and bool(v.strip()) and "\x00" not in v and len(v) <= 512


WRONG_SEARCH_ARGS: dict[str, st.SearchStrategy[Any]] = {
    "session_id": wrong(
        lambda v: v is None or _is_id(v) or (isinstance(v, list) and all(map(_is_id, v)))
    ),
    "tags": wrong(
        lambda v: v is None or (isinstance(v, list) and all(isinstance(t, str) for t in v))
    ),
    "top_k": wrong(lambda v: type(v) is int and 1 <= v <= 1000),
    "mode": wrong(lambda v: v in ("hybrid", "vector", "fts")),
    "fusion": wrong(lambda v: v in ("weighted", "rrf")),
    # None = the embedder's recommended weights.
    "vector_weight": wrong(
        lambda v: v is None or (type(v) in (int, float) and math.isfinite(v) and v >= 0)
    ),
    "fts_weight": wrong(
        lambda v: v is None or (type(v) in (int, float) and math.isfinite(v) and v >= 0)
    ),
    "min_score": wrong(lambda v: v is None or (type(v) in (int, float) and math.isfinite(v))),
    "query_embedding": wrong(lambda v: v is None),
}


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_wrong_types_for_search_are_invalid_input(mem: mindfile.Mindfile) -> None:
    seed_store(mem)

    @settings(max_examples=200)
    @given(data=st.data(), name=st.sampled_from(sorted(WRONG_SEARCH_ARGS)))
    def run(data: st.DataObject, name: str) -> None:
        value = data.draw(WRONG_SEARCH_ARGS[name])
        with pytest.raises(InvalidInputError):
            mem.search("milk", **{name: value})

    run()

    @settings(max_examples=50)
    @given(query=junk.filter(lambda v: not isinstance(v, str)))
    def run_query(query: Any) -> None:
        with pytest.raises(InvalidInputError):
            mem.search(query)

    run_query()


WRONG_STORE_ARGS: dict[str, st.SearchStrategy[Any]] = {
    "session_id": wrong(_is_id),
    "sequence": st.one_of(
        wrong(lambda v: type(v) is int and 0 <= v < 2**63),
        st.sampled_from([-1, 2**63, 2**80, True, 1.0]),
    ),
    "payload": st.one_of(
        st.builds(object),
        st.binary(min_size=1),
        st.sets(st.integers(), min_size=1),
        st.just(float("nan")),
        st.just({"nested": [1, float("inf")]}),
        st.just({"bad": "\ud800"}),
        st.just({(1, 2): "tuple key"}),
    ),
    "metadata": wrong(lambda v: v is None or isinstance(v, dict)),
    "tags": wrong(
        lambda v: v is None or (isinstance(v, list) and all(isinstance(t, str) for t in v))
    ),
    "agent_identity": wrong(lambda v: v is None or _is_id(v)),
}


def test_wrong_types_for_the_other_methods_are_invalid_input(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "hello")

    @settings(max_examples=200)
    @given(data=st.data(), name=st.sampled_from(sorted(WRONG_STORE_ARGS)))
    def run(data: st.DataObject, name: str) -> None:
        args: dict[str, Any] = {"session_id": "t", "sequence": 1, "payload": "hi"}
        args[name] = data.draw(WRONG_STORE_ARGS[name])
        with pytest.raises(InvalidInputError):
            mem.store(**args)

    run()

    @settings(max_examples=100)
    @given(
        sid=wrong(_is_id),
        limit=wrong(lambda v: v is None or (type(v) is int and v >= 0)),
        budget=wrong(lambda v: type(v) is int and v >= 0),
    )
    def run_read(sid: Any, limit: Any, budget: Any) -> None:
        with pytest.raises(InvalidInputError):
            mem.recall(sid)
        with pytest.raises(InvalidInputError):
            mem.recall("s", limit)
        with pytest.raises(InvalidInputError):
            mem.forget(sid)
        with pytest.raises(InvalidInputError):
            mem.restore(sid, 10)
        with pytest.raises(InvalidInputError):
            mem.restore("s", budget)

    run_read()
    assert [r.sequence for r in mem.recall("s")] == [1]
    assert [s.session_id for s in mem.list_sessions()] == ["s"]


json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.sampled_from(["\ud800", "a\x00b", "\udfff\ud800", "🙂" * 50]),
    st.builds(object),
    st.binary(max_size=4),
)
payloads = st.one_of(
    st.recursive(
        json_leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(st.text(max_size=10), children, max_size=4),
            st.fixed_dictionaries({"role": st.sampled_from(["user", "tool"]), "content": children}),
            st.fixed_dictionaries(
                {
                    "tool_calls": st.lists(
                        st.fixed_dictionaries(
                            {
                                "function": st.fixed_dictionaries(
                                    {"name": st.text(max_size=5), "arguments": st.text()}
                                )
                            }
                        ),
                        max_size=2,
                    )
                }
            ),
        ),
        max_leaves=12,
    ),
    st.integers(1_000, 100_000).map(lambda n: ("lorem ipsum dolor sit amet " * (n // 27 + 1))[:n]),
)


def test_store_fuzz_keeps_the_store_consistent(mem: mindfile.Mindfile) -> None:
    sequence = iter(range(10**9))
    outcomes = {"ok": 0, "error": 0}

    @settings(max_examples=200)
    @given(
        payload=payloads,
        metadata=st.one_of(
            st.none(), st.dictionaries(st.text(max_size=5), json_leaves, max_size=3)
        ),
        tags=st.one_of(st.none(), st.lists(st.text(max_size=70), max_size=18)),
        session=st.sampled_from(["a", "b", "c"]),
        conflict=st.booleans(),
    )
    def run(payload: Any, metadata: Any, tags: Any, session: str, conflict: bool) -> None:
        seq = 0 if conflict else next(sequence) + 1
        try:
            mem.store(session, seq, payload, metadata=metadata, tags=tags)
        except MindfileError:
            outcomes["error"] += 1
        else:
            outcomes["ok"] += 1

    run()
    assert outcomes["ok"] > 20 and outcomes["error"] > 20, outcomes
    assert_consistent(mem)
    for session in ("a", "b", "c"):
        records = mem.recall(session)
        assert [r.sequence for r in records] == sorted({r.sequence for r in records})
    assert mem.search("lorem ipsum")
