"""The write path: sessions, monotonic sequences, extraction, chunking, dedup, atomicity."""

from __future__ import annotations

import itertools
import json
import sys

import pytest
from backends import raw
from hypothesis import given, settings
from hypothesis import strategies as st

import mindfile
from mindfile.errors import ConflictError, EmbeddingError, InvalidInputError, LimitExceededError
from mindfile.index.chunking import ChunkSpec, chunk_text
from mindfile.index.extract import extract_role, extract_text

from ._support import BrokenEmbedder, assert_consistent, counts


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


def chunk_texts(mem: mindfile.Mindfile, session_id: str | None = None) -> list[str]:
    if session_id is None:
        return [r[0] for r in raw(mem).query("SELECT chunk_text FROM chunks ORDER BY id")]
    return [
        r[0]
        for r in raw(mem).query(
            "SELECT chunk_text FROM chunks WHERE session_id = ? ORDER BY id", (session_id,)
        )
    ]


# -- sessions and sequences ----------------------------------------------------------------


def test_store_creates_then_updates_the_session(mem: mindfile.Mindfile) -> None:
    sql = "SELECT created_at, updated_at, agent_identity FROM sessions WHERE session_id = 's1'"
    mem.store("s1", 1, "first", agent_identity="agent-a")
    first = raw(mem).query_one(sql)
    mem.store("s1", 2, "second")  # no identity: keeps the known one
    second = raw(mem).query_one(sql)
    assert first is not None and second is not None
    assert second[0] == first[0]
    assert second[1] > first[1]
    assert second[2] == first[2] == "agent-a"
    assert counts(mem)["sessions"] == 1


@pytest.mark.parametrize("bad_sequence", [5, 4, 0])
def test_non_increasing_sequence_conflicts_and_writes_nothing(
    mem: mindfile.Mindfile, bad_sequence: int
) -> None:
    mem.store("s1", 5, "the original five")
    before = counts(mem)
    updated = raw(mem).scalar("SELECT updated_at FROM sessions")
    with pytest.raises(ConflictError) as info:
        mem.store("s1", bad_sequence, "a brand new text that would be a new chunk")
    assert info.value.details["last_sequence"] == 5
    assert counts(mem) == before
    assert raw(mem).scalar("SELECT updated_at FROM sessions") == updated
    assert [r.sequence for r in mem.recall("s1")] == [5]


def test_sequences_are_per_session(mem: mindfile.Mindfile) -> None:
    mem.store("a", 7, "x")
    mem.store("b", 1, "y")  # lower than a's, but another session
    assert [s.last_sequence for s in mem.list_sessions()] == [1, 7]


def test_recall_order_and_limit(mem: mindfile.Mindfile) -> None:
    for seq in (1, 2, 5, 10):
        mem.store("s1", seq, {"role": "user", "content": f"message {seq}"})
    assert [r.sequence for r in mem.recall("s1")] == [1, 2, 5, 10]
    assert [r.sequence for r in mem.recall("s1", limit=2)] == [5, 10]
    assert [r.sequence for r in mem.recall("s1", limit=100)] == [1, 2, 5, 10]
    assert mem.recall("s1", limit=0) == []
    assert mem.recall("nobody") == []
    first = mem.recall("s1")[0]
    assert first.payload == {"role": "user", "content": "message 1"}
    assert first.session_id == "s1"
    with pytest.raises(InvalidInputError):
        mem.recall("s1", limit=-1)


def test_last_sequence_is_kept_in_session_state(mem: mindfile.Mindfile) -> None:
    for seq in (3, 8, 13):
        mem.store("s1", seq, f"text {seq}")
    state = json.loads(raw(mem).scalar("SELECT state_json FROM session_state"))
    assert state == {"last_sequence": 13}
    assert mem.list_sessions()[0].last_sequence == 13
    assert mem.list_sessions()[0].event_count == 3


# -- text extraction -----------------------------------------------------------------------


def test_plain_string_is_indexed_normalised(mem: mindfile.Mindfile) -> None:
    assert mem.store("s", 1, "  I moved to\n\nLisbon   in May.  ") == 1
    assert chunk_texts(mem) == ["I moved to Lisbon in May."]


def test_openai_messages(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, {"role": "user", "content": "What's the weather in Lisbon?"})
    mem.store(
        "s",
        2,
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look at this photo of Porto"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
    )
    mem.store(
        "s",
        3,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": json.dumps({"city": "Coimbra", "days": 3}),
                    },
                }
            ],
        },
    )
    texts = chunk_texts(mem)
    assert texts[0] == "What's the weather in Lisbon?"
    assert texts[1] == "Look at this photo of Porto"
    assert "get_weather" in texts[2] and "Coimbra" in texts[2] and "3" in texts[2]
    assert "{" not in texts[2]  # arguments were parsed, not indexed as raw JSON
    roles = [json.loads(r[0])["role"] for r in raw(mem).query("SELECT metadata_json FROM chunks")]
    assert roles == ["user", "user", "assistant"]


def test_anthropic_messages(mem: mindfile.Mindfile) -> None:
    mem.store(
        "s",
        1,
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check the forecast."},
                {"type": "tool_use", "id": "tu_1", "name": "forecast", "input": {"q": "Faro"}},
            ],
        },
    )
    mem.store(
        "s",
        2,
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": "Sunny, 24C in Faro"}
            ],
        },
    )
    mem.store(
        "s",
        3,
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "tu_2",
                    "content": [{"type": "text", "text": "Rain expected in Braga"}],
                }
            ],
        },
    )
    first, second, third = chunk_texts(mem)
    assert "Let me check the forecast." in first
    assert "forecast" in first and "Faro" in first
    assert second == "Sunny, 24C in Faro"
    assert third == "Rain expected in Braga"


def test_extract_role() -> None:
    assert extract_role({"role": "tool", "content": "x"}) == "tool"
    assert extract_role("plain") is None
    assert extract_role({"role": 5}) is None


def test_extract_text_of_an_arbitrary_record() -> None:
    # The module promises that no payload is unindexable by shape.
    text = extract_text({"event": "login", "detail": {"user": "bob", "ok": True}})
    assert "login" in text and "bob" in text
    assert extract_text({"note": "remember the milk"}) == "remember the milk"


def test_extract_text_skips_images_and_empty_parts() -> None:
    assert extract_text({"type": "image", "source": {"data": "AAAA"}}) == ""
    assert extract_text(["a", "", "  ", None, "b"]) == "a\nb"
    assert extract_text(None) == ""


def test_payload_without_text_stores_an_event_but_no_chunk(mem: mindfile.Mindfile) -> None:
    assert mem.store("s", 1, {"role": "user", "content": ""}) == 0
    assert mem.store("s", 2, None) == 0
    assert [r.sequence for r in mem.recall("s")] == [1, 2]
    assert counts(mem)["chunks"] == 0


# -- chunking ------------------------------------------------------------------------------


def long_text(sentences: int = 60) -> str:
    return " ".join(
        f"Sentence number {i} talks about topic {i * 7 % 13} in some detail here."
        for i in range(sentences)
    )


def test_long_text_is_chunked_with_overlap(mem: mindfile.Mindfile) -> None:
    text = long_text()
    added = mem.store("s", 1, text)
    chunks = chunk_texts(mem)
    assert added == len(chunks) > 1
    assert all(len(c) <= 640 for c in chunks)
    for before, after in itertools.pairwise(chunks):
        head = after[:30]
        assert head in before, "consecutive chunks must overlap"
        overlap = len(before) - before.rindex(head)
        assert 0 < overlap <= 96 + 1
    assert chunks[0].startswith("Sentence number 0 ")
    assert chunks[-1].endswith("in some detail here.")


def test_text_without_spaces_is_still_bounded() -> None:
    chunks = chunk_text("x" * 5000)
    assert len(chunks) > 1
    assert all(len(c) <= 640 for c in chunks)


@settings(max_examples=150)
@given(
    words=st.lists(st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=30)),
    max_chars=st.integers(16, 300),
    overlap_frac=st.floats(0, 0.49),
)
def test_chunking_bounds_and_coverage(
    words: list[str], max_chars: int, overlap_frac: float
) -> None:
    spec = ChunkSpec(max_chars, min(int(max_chars * overlap_frac), max_chars // 2 - 1))
    text = " ".join(words)
    chunks = chunk_text(text, spec)
    assert all(0 < len(c) <= max_chars for c in chunks)
    if not text.strip():
        assert chunks == []
        return
    assert chunks[0] == " ".join(text.split())[: len(chunks[0])]
    # Every word survives somewhere (words longer than a chunk are cut, not lost).
    joined = " ".join(chunks)
    for word in words:
        if len(word) <= max_chars // 4:
            assert word in joined


# -- dedup ---------------------------------------------------------------------------------


def test_same_content_later_extends_the_chunk(mem: mindfile.Mindfile) -> None:
    assert mem.store("s", 1, "remember the milk") == 1
    assert mem.store("s", 2, "something else") == 1
    assert mem.store("s", 7, {"role": "user", "content": "remember   the milk"}) == 0
    rows = raw(mem).query(
        "SELECT sequence_start, sequence_end FROM chunks WHERE chunk_text = 'remember the milk'"
    )
    assert rows == [(1, 7)]
    assert counts(mem)["chunks"] == 2
    assert len(mem.recall("s")) == 3  # the event itself is always stored


def test_same_content_in_another_session_is_a_separate_chunk(mem: mindfile.Mindfile) -> None:
    mem.store("a", 1, "remember the milk")
    mem.store("b", 1, "remember the milk")
    ids = [r[0] for r in raw(mem).query("SELECT chunk_id FROM chunks ORDER BY id")]
    assert len(ids) == len(set(ids)) == 2
    assert_consistent(mem)


# -- all or nothing ------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["raise", "shape", "nan"])
def test_embedder_failure_writes_nothing(db_path: object, how: str) -> None:
    with mindfile.open(str(db_path), embedder=BrokenEmbedder(how)) as mem:
        before = counts(mem)
        with pytest.raises(EmbeddingError):
            mem.store("s1", 1, "this text needs a vector")
        assert counts(mem) == before == dict.fromkeys(before, 0)
        assert mem.list_sessions() == []
        # An event with no text needs no vector, so it still works.
        assert mem.store("s1", 1, "") == 0


def test_store_many_is_all_or_nothing(mem: mindfile.Mindfile) -> None:
    mem.store("old", 1, "already here")
    before = counts(mem)
    events = [
        ("new", 1, "one"),
        ("new", 2, {"role": "user", "content": "two"}, {"source": "test"}),
        ("new", 2, "three conflicts with two"),
        ("other", 1, "four"),
    ]
    with pytest.raises(ConflictError):
        mem.store_many(events)
    assert counts(mem) == before
    assert [s.session_id for s in mem.list_sessions()] == ["old"]
    ok = [e for i, e in enumerate(events) if i != 2]
    assert mem.store_many(ok) == 3
    meta = json.loads(raw(mem).scalar("SELECT metadata_json FROM chunks WHERE chunk_text = 'two'"))
    assert meta == {"source": "test", "role": "user"}


def test_store_many_conflicting_with_stored_data(mem: mindfile.Mindfile) -> None:
    mem.store("s", 5, "five")
    before = counts(mem)
    with pytest.raises(ConflictError):
        mem.store_many([("t", 1, "fine"), ("s", 6, "fine too"), ("s", 3, "too low")])
    assert counts(mem) == before


@pytest.mark.parametrize("events", [None, 5, "abc", [("s", 1)], [("s", 1, "x", {}, "extra")]])
def test_store_many_rejects_malformed_input(mem: mindfile.Mindfile, events: object) -> None:
    with pytest.raises(InvalidInputError):
        mem.store_many(events)  # type: ignore[arg-type]
    assert counts(mem)["conversation_events"] == 0


def test_tags_and_metadata_go_on_every_chunk(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, long_text(), metadata={"k": "v"}, tags=["Travel", " travel ", "Work"])
    metas = {r[0] for r in raw(mem).query("SELECT metadata_json FROM chunks")}
    assert [json.loads(m) for m in metas] == [{"k": "v", "tags": ["travel", "work"]}]
    with pytest.raises(LimitExceededError):
        mem.store("s", 2, "x", tags=[f"t{i}" for i in range(17)])


# -- hostile shapes ------------------------------------------------------------------------


def nested(depth: int, leaf: object = "deep text") -> object:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [200, 5000])
def test_deeply_nested_payload_is_refused(mem: mindfile.Mindfile, depth: int) -> None:
    with pytest.raises(InvalidInputError):
        mem.store("s", 1, nested(depth))
    with pytest.raises(InvalidInputError):
        mem.store("s", 1, "x", metadata={"k": nested(depth)})
    assert counts(mem)["conversation_events"] == 0


def test_accepted_nested_payload_reads_back_from_a_deep_stack(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, {"role": "user", "content": nested(60)})

    def deep_call(n: int) -> list[mindfile.MemoryRecord]:
        return mem.restore("s", 10_000) if n == 0 else deep_call(n - 1)

    # Leave little head-room, as a server framework's call stack might.
    depth = sys.getrecursionlimit() - 400
    assert [r.sequence for r in deep_call(depth)] == [1]


def test_deeply_nested_tool_arguments_do_not_crash(mem: mindfile.Mindfile) -> None:
    arguments = "[" * 5000 + "]" * 5000
    payload = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"function": {"name": "lookup", "arguments": arguments}}],
    }
    mem.store("s", 1, payload)
    deep_json = json.dumps(nested(900, "needle"))
    payload["tool_calls"][0]["function"]["arguments"] = deep_json  # type: ignore[index]
    mem.store("s", 2, payload)
    assert any("needle" in t for t in chunk_texts(mem))


@pytest.mark.parametrize("bad", ["\ud800", "ok\udfff"])
def test_lone_surrogates_in_ids_are_invalid_input(mem: mindfile.Mindfile, bad: str) -> None:
    with pytest.raises(InvalidInputError):
        mem.store(bad, 1, "x")
    with pytest.raises(InvalidInputError):
        mem.store("s", 1, "x", agent_identity=bad)
    with pytest.raises(InvalidInputError):
        mem.recall(bad)
    with pytest.raises(InvalidInputError):
        mem.forget(bad)
    with pytest.raises(InvalidInputError):
        mem.restore(bad, 100)
    with pytest.raises(InvalidInputError):
        mem.search("x", session_id=bad)
    with pytest.raises(InvalidInputError):
        mem.search("x", session_id=["fine", bad])
    with pytest.raises(InvalidInputError):
        mem.search("x", tags=[bad])
    assert counts(mem)["conversation_events"] == 0
