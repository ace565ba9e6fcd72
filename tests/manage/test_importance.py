"""Importance: role defaults, explicit values, marking, pinning and the use boost."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from backends import raw

import mindfile
from mindfile.errors import InvalidInputError, NotFoundError
from mindfile.manage import ROLE_IMPORTANCE, USE_BOOST, boosted, decayed, effective_importance
from mindfile.memory import notes_session
from mindfile.storage.db import Database

from ._support import assert_consistent, chunk_row, chunk_rows, expire_event, snapshot


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


def texts(hits: list[mindfile.SearchHit]) -> list[str]:
    return [h.text for h in hits]


def test_role_defaults_are_the_seeds_table(mem: mindfile.Mindfile) -> None:
    messages = [
        ({"role": "user", "content": "user says hello"}, 0.5),
        ({"role": "assistant", "content": "assistant answers"}, 0.5),
        ({"role": "tool", "content": "tool output here"}, 0.3),
        ({"role": "system", "content": "system instructions"}, 0.1),
        ({"role": "developer", "content": "developer instructions"}, 0.1),
        ({"role": "function", "content": "legacy function result"}, 0.3),
        ({"role": "narrator", "content": "an unknown role"}, 0.5),
        ("a plain string without a role", 0.5),
        ({"content": "a dict without a role"}, 0.5),
    ]
    for seq, (payload, _) in enumerate(messages, start=1):
        mem.store("s", seq, payload)
    got = [chunk_row(mem, "s", seq)["importance"] for seq in range(1, len(messages) + 1)]
    assert got == [want for _, want in messages]
    assert ROLE_IMPORTANCE["tool"] == 0.3 and ROLE_IMPORTANCE["system"] == 0.1
    assert_consistent(mem)


def test_metadata_role_counts_like_the_payload_role(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "raw tool output", metadata={"role": "tool"})
    assert chunk_row(mem, "s", 1)["importance"] == 0.3


def test_explicit_importance_overrides_the_role(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, {"role": "tool", "content": "critical tool output"}, importance=0.95)
    mem.store("s", 2, {"role": "user", "content": "never mind"}, importance=0)
    mem.store_many([("s", 3, "batch one"), ("s", 4, "batch two")], importance=0.7)
    assert chunk_row(mem, "s", 1)["importance"] == 0.95
    assert chunk_row(mem, "s", 2)["importance"] == 0.0
    assert [chunk_row(mem, "s", q)["importance"] for q in (3, 4)] == [0.7, 0.7]


@pytest.mark.parametrize("bad", [-0.01, 1.01, math.nan, math.inf, "0.5", True, None])
def test_invalid_importance_is_refused_and_nothing_is_written(
    mem: mindfile.Mindfile, bad: object
) -> None:
    before = snapshot(mem)
    with pytest.raises(InvalidInputError):
        mem.store("s", 1, "hello", importance=bad if bad is not None else -1)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        mem.store_note(
            notes_session("ann"), "n1", "a note", importance=bad if bad is not None else 2
        )  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        mem.store_many([("s", 1, "x")], importance=bad if bad is not None else 9)  # type: ignore[arg-type]
    assert snapshot(mem) == before


def test_notes_default_to_half_and_take_an_explicit_value(mem: mindfile.Mindfile) -> None:
    ns = notes_session("ann")
    plain = mem.store_note(ns, "n1", "Ann prefers tea.")
    marked = mem.store_note(ns, "n2", "Ann is allergic to peanuts.", importance=0.9)
    assert chunk_row(mem, ns, plain.sequence)["importance"] == 0.5
    assert chunk_row(mem, ns, marked.sequence)["importance"] == 0.9


def test_a_shared_chunk_keeps_the_highest_importance(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, {"role": "tool", "content": "ok"})
    mem.store("s", 2, {"role": "user", "content": "ok"})
    mem.store("s", 3, {"role": "system", "content": "ok"})
    (row,) = raw(mem).query("SELECT importance, sequence_start, sequence_end FROM chunks")
    assert row == (0.5, 1, 3)
    # The one chunk holds the text of all three events.
    assert [r["id"] for r in chunk_rows(mem, "s", 1)] == [r["id"] for r in chunk_rows(mem, "s", 3)]


def test_mark_important_sets_every_chunk_of_the_event(mem: mindfile.Mindfile) -> None:
    long_text = " ".join(f"Sentence number {i} about the migration plan." for i in range(40))
    mem.store("s", 1, {"role": "tool", "content": long_text})
    mem.store("s", 2, {"role": "user", "content": "unrelated"})
    n = len(chunk_rows(mem, "s", 1))
    assert n > 1
    assert mem.mark_important("s", 1) == n
    assert {r["importance"] for r in chunk_rows(mem, "s", 1)} == {0.9}
    assert chunk_row(mem, "s", 2)["importance"] == 0.5
    assert mem.mark_important("s", 1, importance=0.2) == n  # lowering is allowed too
    assert {r["importance"] for r in chunk_rows(mem, "s", 1)} == {0.2}


def test_marking_validates_and_reports_missing_targets(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "hello")
    mem.store("s", 2, {"role": "assistant", "content": "", "tool_calls": []})  # no text
    with pytest.raises(NotFoundError):
        mem.mark_important("s", 99)
    with pytest.raises(NotFoundError):
        mem.pin("nope", 1)
    with pytest.raises(InvalidInputError):
        mem.mark_important("s", 1, importance=1.5)
    with pytest.raises(InvalidInputError):
        mem.pin("s", "1")  # type: ignore[arg-type]
    assert mem.pin("s", 2) == 0  # an event with no chunks has nothing to pin
    with pytest.raises(NotFoundError):
        mem.pin_note(notes_session("ann"), "missing")


def test_pin_and_unpin_events_and_notes(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "keep this forever")
    assert mem.pin("s", 1) == 1
    assert chunk_row(mem, "s", 1)["pinned"] == 1
    assert mem.unpin("s", 1) == 1
    assert chunk_row(mem, "s", 1)["pinned"] == 0
    ns = notes_session("ann")
    note = mem.store_note(ns, "n1", "Ann's passport number is in the safe.")
    assert mem.pin_note(ns, "n1") == 1
    assert mem.mark_note_important(ns, "n1", 0.8) == 1
    row = chunk_row(mem, ns, note.sequence)
    assert (row["pinned"], row["importance"]) == (1, 0.8)
    assert mem.unpin_note(ns, "n1") == 1
    assert chunk_row(mem, ns, note.sequence)["pinned"] == 0


def test_a_replaced_note_keeps_its_pin_importance_and_use(mem: mindfile.Mindfile) -> None:
    ns = notes_session("ann")
    mem.store_note(ns, "n1", "Ann lives in Lisbon.", importance=0.8)
    mem.pin_note(ns, "n1")
    hit = mem.search("Lisbon", session_id=ns, top_k=1)[0]
    mem.record_use([hit.chunk_id])
    updated = mem.update_note(ns, "n1", content="Ann lives in Porto.")
    row = chunk_row(mem, ns, updated.sequence)
    assert row["pinned"] == 1
    assert row["importance"] == pytest.approx(boosted(0.8))
    assert row["access_count"] == 1
    replaced = mem.store_note(ns, "n1", "Ann lives in Faro.", importance=0.3)
    assert chunk_row(mem, ns, replaced.sequence)["importance"] == 0.3
    assert_consistent(mem)


def test_record_use_applies_the_bounded_boost(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "the launch code is in the drawer")
    chunk_id = chunk_row(mem, "s", 1)["chunk_id"]
    expected = 0.5
    for _ in range(3):
        assert mem.record_use([chunk_id, chunk_id]) == 1  # once per call, however listed
        expected = expected + USE_BOOST * (1 - expected)
    row = chunk_row(mem, "s", 1)
    assert row["importance"] == pytest.approx(expected)
    assert row["importance"] == pytest.approx(1 - 0.5 * 0.95**3)
    assert row["access_count"] == 3
    assert row["last_accessed_at"] is not None and row["last_accessed_at"] >= row["created_at"]
    assert mem.record_use(["ch_doesnotexist"]) == 0
    assert mem.record_use([]) == 0
    with pytest.raises(InvalidInputError):
        mem.record_use("ch_a_string_not_a_list")
    # Bounded: it approaches 1 and never passes it.
    value = 0.0
    for _ in range(1000):
        value = boosted(value)
    assert value <= 1.0


@pytest.mark.sqlite_only("watches SQLite's data_version")
def test_search_never_writes(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "read paths stay read only")
    mem.store("s", 2, "this one has expired", ttl=3600)
    expire_event(mem, "s", 2)
    before = snapshot(mem)
    watcher = Database(mem.path)  # data_version moves when another connection commits
    version = watcher.data_version()
    for mode in ("hybrid", "vector", "fts"):
        assert texts(mem.search("read only", mode=mode)) == ["read paths stay read only"]  # type: ignore[arg-type]
    assert watcher.data_version() == version
    watcher.close()
    assert snapshot(mem) == before


def test_decay_formula_and_pinned_salience() -> None:
    now = datetime(2025, 1, 10, tzinfo=UTC)
    day = 86400.0
    assert decayed(0.8, 2 * day, day) == pytest.approx(0.2)
    assert decayed(0.8, 2 * day, None) == 0.8
    assert effective_importance(
        0.8, last_used=now - timedelta(days=3), now=now, half_life_seconds=day
    ) == pytest.approx(0.1)
    assert effective_importance(0.1, pinned=True, now=now, half_life_seconds=day) == 1.0
    assert effective_importance(0.4) == 0.4
