"""The working-memory scratchpad: replace semantics, limits, scoping, state sharing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from backends import raw

import mindfile
from mindfile.errors import ConflictError, InvalidInputError, LimitExceededError
from mindfile.memory import MAX_SCRATCHPAD_ITEM_CHARS, MAX_SCRATCHPAD_ITEMS, SummaryState


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


def state_json(mem: mindfile.Mindfile, session_id: str) -> dict[str, object]:
    text = raw(mem).scalar(
        "SELECT state_json FROM session_state WHERE session_id = ?", (session_id,)
    )
    return {} if text is None else dict(json.loads(text))


def test_read_write_replace_clear(mem: mindfile.Mindfile) -> None:
    assert mem.read_scratchpad("s1") is None
    pad = mem.write_scratchpad("s1", ["goal: ship v1", "  step 1 done  "])
    assert pad.items == ("goal: ship v1", "step 1 done")
    assert mem.read_scratchpad("s1") == pad
    pad2 = mem.write_scratchpad("s1", ["only this"])
    assert mem.read_scratchpad("s1") == pad2  # the whole pad was replaced
    assert pad2.updated_at >= pad.updated_at
    assert mem.write_scratchpad("s1", []).items == ()
    assert mem.read_scratchpad("s1") is not None  # an empty pad is still a pad
    assert mem.clear_scratchpad("s1") is True
    assert mem.read_scratchpad("s1") is None
    assert mem.clear_scratchpad("s1") is False


def test_limits_are_inclusive(mem: mindfile.Mindfile) -> None:
    items = [
        f"{i:02d}" + "x" * (MAX_SCRATCHPAD_ITEM_CHARS - 2) for i in range(MAX_SCRATCHPAD_ITEMS)
    ]
    assert len(mem.write_scratchpad("s1", items).items) == 32


@pytest.mark.parametrize(
    ("items", "error"),
    [
        (["x"] * 33, LimitExceededError),
        (["ok", "y" * 241], LimitExceededError),
        (["ok", 7], InvalidInputError),
        (["ok", "   "], InvalidInputError),
        ("a string, not a list", InvalidInputError),
        (None, InvalidInputError),
        (["bad \udc00"], InvalidInputError),
    ],
    ids=["33-items", "241-chars", "non-string", "blank", "str", "none", "surrogate"],
)
def test_over_limit_or_bad_writes_keep_the_old_pad(
    mem: mindfile.Mindfile, items: object, error: type
) -> None:
    old = mem.write_scratchpad("s1", ["keep me"])
    with pytest.raises(error):
        mem.write_scratchpad("s1", items)  # type: ignore[arg-type]
    assert mem.read_scratchpad("s1") == old


def test_limit_error_is_clear(mem: mindfile.Mindfile) -> None:
    with pytest.raises(LimitExceededError, match="240") as info:
        mem.write_scratchpad("s1", ["ok", "y" * 300])
    assert "item 1" in info.value.message


def test_session_scoped(mem: mindfile.Mindfile) -> None:
    mem.write_scratchpad("s1", ["for s1"])
    assert mem.read_scratchpad("s2") is None
    assert mem.clear_scratchpad("s2") is False
    mem.forget("s1")
    assert mem.read_scratchpad("s1") is None


def test_writing_creates_a_missing_session_and_clearing_does_not(mem: mindfile.Mindfile) -> None:
    mem.clear_scratchpad("ghost")
    assert mem.list_sessions() == []
    mem.write_scratchpad("new", ["x"])
    [info] = mem.list_sessions()
    assert info.session_id == "new" and info.event_count == 0
    mem.store("new", 1, "the first message still gets sequence 1")


def test_does_not_clobber_last_sequence_or_summary(mem: mindfile.Mindfile) -> None:
    mem.store("s1", 1, "hello")
    mem.write_summary_state("s1", SummaryState("so far", 1), 0)
    mem.write_scratchpad("s1", ["x"])
    state = state_json(mem, "s1")
    assert state["last_sequence"] == 1
    assert state["summary_state"]["epoch"] == 1  # type: ignore[index]
    mem.store("s1", 2, "next message")  # the core's own bookkeeping is intact
    with pytest.raises(ConflictError):
        mem.store("s1", 2, "duplicate sequence")
    mem.clear_scratchpad("s1")
    state = state_json(mem, "s1")
    assert "scratchpad" not in state and state["last_sequence"] == 2
    assert mem.read_summary_state("s1") is not None


def test_bad_session_id(mem: mindfile.Mindfile) -> None:
    for call in (mem.read_scratchpad, mem.clear_scratchpad):
        with pytest.raises(InvalidInputError):
            call("")
    with pytest.raises(InvalidInputError):
        mem.write_scratchpad("", ["x"])


def test_persists_across_reopen(db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash") as mem:
        pad = mem.write_scratchpad("s1", ["remember the milk"])
    with mindfile.open(db_path) as mem:
        assert mem.read_scratchpad("s1") == pad
