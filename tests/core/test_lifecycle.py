"""Forgetting, listing sessions, and restoring a conversation tail within a token budget."""

from __future__ import annotations

import pytest
from backends import raw
from hypothesis import given, settings
from hypothesis import strategies as st
from memory._support import fts_match

import mindfile
from mindfile.errors import InvalidInputError
from mindfile.storage.db import utcnow
from mindfile.tokens import MESSAGE_OVERHEAD, estimate_tokens, message_tokens

from ._support import assert_consistent, counts


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


def session_rows(mem: mindfile.Mindfile, session_id: str) -> dict[str, int]:
    out = {}
    for table in ("sessions", "conversation_events", "session_state", "chunks", "files"):
        out[table] = int(
            raw(mem).scalar(f"SELECT count(*) FROM {table} WHERE session_id = ?", (session_id,))
        )
    out["chunks_vec"] = int(
        raw(mem).scalar(
            "SELECT count(*) FROM chunks_vec WHERE chunk_rowid NOT IN (SELECT id FROM chunks)"
        )
    )
    return out


def test_forget_cascades_everywhere(mem: mindfile.Mindfile) -> None:
    mem.store("gone", 1, "zanzibar spices and a long voyage")
    mem.store("gone", 2, "another quokka sighting", tags=["zoo"])
    mem.store("kept", 1, "zanzibar is an archipelago")
    raw(mem).execute(
        "INSERT INTO files (session_id, root, path, content_hash, size, mtime_ns, indexed_at) "
        "VALUES ('gone', '/r', 'a.txt', 'h', 1, 1, ?)",
        (utcnow(),),
    )
    assert mem.search("quokka", mode="fts")  # FTS and vector index are warm
    assert len(mem.search("zanzibar", mode="vector", top_k=10)) == 3

    assert mem.forget("gone") is True
    assert session_rows(mem, "gone") == dict.fromkeys(session_rows(mem, "gone"), 0)
    assert counts(mem) == {
        "sessions": 1,
        "conversation_events": 1,
        "session_state": 1,
        "chunks": 1,
        "chunks_vec": 1,
        "files": 0,
        "chunks_fts": 1,
    }
    assert fts_match(mem, "quokka") == []  # the full-text index itself
    assert mem.search("quokka", mode="fts") == []
    hits = mem.search("zanzibar", mode="vector", top_k=10)
    assert [h.session_id for h in hits] == ["kept"]
    assert mem.recall("gone") == []
    assert_consistent(mem)
    assert mem.forget("gone") is False


def test_forget_then_reuse_the_session_id(mem: mindfile.Mindfile) -> None:
    mem.store("s", 5, "first life")
    mem.forget("s")
    mem.store("s", 1, "first life")  # sequences start over; same text is a new chunk
    assert [r.sequence for r in mem.recall("s")] == [1]
    assert mem.search("first life", mode="fts")[0].sequence_start == 1
    assert_consistent(mem)


def test_list_sessions_most_recently_updated_first(mem: mindfile.Mindfile) -> None:
    mem.store("s1", 1, "a")
    mem.store("s2", 1, "b")
    mem.store("s3", 1, "c")
    mem.store("s1", 2, "d")
    listed = mem.list_sessions()
    assert [s.session_id for s in listed] == ["s1", "s3", "s2"]
    assert [s.event_count for s in listed] == [2, 1, 1]
    assert listed[0].updated_at > listed[1].updated_at > listed[2].updated_at
    assert listed[0].created_at < listed[0].updated_at


# -- restore -------------------------------------------------------------------------------


def test_restore_returns_the_newest_contiguous_tail(mem: mindfile.Mindfile) -> None:
    texts = ["a" * 40, "b" * 4, "c" * 400, "d" * 8, "e" * 12]
    for seq, text in enumerate(texts, start=1):
        mem.store("s", seq, {"role": "user", "content": text})
    cost = [estimate_tokens(t) + MESSAGE_OVERHEAD for t in texts]  # 14, 5, 104, 6, 7
    assert [r.sequence for r in mem.restore("s", cost[3] + cost[4])] == [4, 5]
    # "b" would fit on its own, but "c" does not: the tail stops there.
    assert [r.sequence for r in mem.restore("s", cost[3] + cost[4] + cost[1])] == [4, 5]
    assert [r.sequence for r in mem.restore("s", sum(cost))] == [1, 2, 3, 4, 5]
    assert mem.restore("s", cost[4] - 1) == []
    assert mem.restore("s", 0) == []
    assert mem.restore("nobody", 1000) == []


def test_restore_with_a_custom_counter(mem: mindfile.Mindfile) -> None:
    for seq in range(1, 6):
        mem.store("s", seq, f"message {seq}")
    words = mem.restore("s", 3 * (2 + MESSAGE_OVERHEAD), token_counter=lambda s: len(s.split()))
    assert [r.sequence for r in words] == [3, 4, 5]


@pytest.mark.parametrize("budget", [-1, 1.5, "10", None, True])
def test_restore_rejects_bad_budgets(mem: mindfile.Mindfile, budget: object) -> None:
    with pytest.raises(InvalidInputError):
        mem.restore("s", budget)  # type: ignore[arg-type]


def test_restore_rejects_a_counter_that_is_not_callable(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "x")
    with pytest.raises(InvalidInputError):
        mem.restore("s", 100, token_counter="tiktoken")  # type: ignore[arg-type]


payloads = st.one_of(
    st.text(max_size=200),
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant"]), "content": st.text(max_size=200)}
    ),
    st.lists(st.text(max_size=20), max_size=5),
)


@settings(max_examples=60)
@given(items=st.lists(payloads, max_size=12), budget=st.integers(0, 400))
def test_restore_property(items: list[object], budget: int) -> None:
    with mindfile.open(":memory:", embedder="hash") as mem:
        for seq, payload in enumerate(items):
            mem.store("s", seq, payload)
        kept = mem.restore("s", budget)
        everything = mem.recall("s")
    costs = [message_tokens(r.payload) for r in everything]
    n = len(kept)
    # Oldest first, and exactly the newest n events.
    assert kept == everything[len(everything) - n :]
    assert sum(costs[len(costs) - n :]) <= budget
    if n < len(everything):  # the next older event would not have fit
        assert sum(costs[len(costs) - n - 1 :]) > budget
