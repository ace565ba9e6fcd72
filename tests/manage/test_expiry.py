"""Expiry: TTLs hidden from every search mode, the sweep, and importance decay."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from backends import raw

import mindfile
from mindfile.errors import InvalidInputError
from mindfile.memory import notes_session

from ._support import (
    age_event,
    ago,
    assert_consistent,
    chunk_row,
    expire_event,
    live_sequences,
    snapshot,
)


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


MODES = ("hybrid", "vector", "fts")


def texts(results: list[mindfile.SearchHit]) -> list[str]:
    return [h.text for h in results]


def test_ttl_sets_expires_at(mem: mindfile.Mindfile) -> None:
    before = datetime.now(UTC)
    mem.store("s", 1, "short lived", ttl=60)
    mem.store("s", 2, "also short lived", ttl=timedelta(hours=1))
    mem.store("s", 3, "forever")
    first = datetime.fromisoformat(chunk_row(mem, "s", 1)["expires_at"])
    second = datetime.fromisoformat(chunk_row(mem, "s", 2)["expires_at"])
    assert before + timedelta(seconds=59) < first < datetime.now(UTC) + timedelta(seconds=61)
    assert second - first == pytest.approx(timedelta(seconds=3540), abs=timedelta(seconds=2))
    assert chunk_row(mem, "s", 3)["expires_at"] is None


@pytest.mark.parametrize("bad", [0, -5, math.nan, math.inf, "60", True, timedelta(0), 1e13])
def test_bad_ttls_are_refused_and_nothing_is_written(mem: mindfile.Mindfile, bad: object) -> None:
    before = snapshot(mem)
    with pytest.raises(InvalidInputError):
        mem.store("s", 1, "x", ttl=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        mem.store_note(notes_session("ann"), "n", "x", ttl=bad)  # type: ignore[arg-type]
    assert snapshot(mem) == before


@pytest.mark.parametrize("index", ["exact", "sqlite-vec"])
@pytest.mark.parametrize("lexical", ["memory", "fts5"])
def test_expired_items_are_hidden_from_every_search_mode(
    tmp_path: Path, index: str, lexical: str
) -> None:
    with mindfile.open(
        tmp_path / "m.db", embedder="hash", vector_index=index, lexical_index=lexical
    ) as mem:
        mem.store("s", 1, "the door code is 4711", ttl=0.05, tags=["secret"])
        mem.store("t", 1, "the door code is 4711", tags=["secret"])
        mem.store("t", 2, "pinned: the door code is 4711", ttl=0.05, tags=["secret"])
        mem.pin("t", 2)
        mem.store("s", 2, "still valid: the door code is 4711", ttl=3600, tags=["secret"])
        time.sleep(0.1)
        expired = chunk_row(mem, "s", 1)["chunk_id"]
        live = {chunk_row(mem, sid, q)["chunk_id"] for sid, q in (("t", 1), ("t", 2), ("s", 2))}
        filters: list[dict[str, object]] = [
            {},
            {"session_id": "s"},
            {"session_id": ["s", "t"]},
            {"tags": ["secret"]},
            {"fusion": "rrf"},
        ]
        for mode in MODES:
            for kwargs in filters:
                hits = mem.search("the door code is 4711", mode=mode, **kwargs)  # type: ignore[arg-type]
                got = {h.chunk_id for h in hits}
                assert expired not in got, (mode, kwargs)
                if "session_id" not in kwargs:
                    assert got == live, (mode, kwargs)
        assert_consistent(mem)


def test_shared_chunk_expires_only_when_every_holder_has(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "ok", ttl=0.05)
    mem.store("s", 2, "ok")  # same text, no TTL: the shared chunk must stay
    time.sleep(0.1)
    assert chunk_row(mem, "s", 1)["expires_at"] is None
    assert texts(mem.search("ok", mode="fts")) == ["ok"]
    assert mem.sweep_expired().expired_chunks == 0
    mem.store("u", 1, "fine", ttl=60)
    mem.store("u", 2, "fine", ttl=7200)  # both expire: the later expiry wins
    assert chunk_row(mem, "u", 1)["expires_at"] > ago(seconds=-7100)


def test_hidden_items_do_not_crowd_out_live_ones(mem: mindfile.Mindfile) -> None:
    for i in range(80):
        mem.store("s", i, f"budget report draft {i}", ttl=0.05)
    mem.store("s", 100, "budget report final")
    mem.store("s", 101, "budget report approved")
    time.sleep(0.1)
    for mode in MODES:
        got = texts(mem.search("budget report", mode=mode, top_k=2))  # type: ignore[arg-type]
        assert sorted(got) == ["budget report approved", "budget report final"], mode


def test_sweep_deletes_expired_chunks_and_emptied_events(mem: mindfile.Mindfile) -> None:
    ns = notes_session("ann")
    mem.store("s", 1, "keep me")
    mem.store("s", 2, "drop me", ttl=0.05)
    mem.store("s", 3, {"role": "assistant", "content": "", "tool_calls": []}, ttl=0.05)
    mem.store("s", 4, "pinned but expired", ttl=0.05)
    mem.pin("s", 4)
    mem.store_note(ns, "temp", "A temporary note.", ttl=0.05)
    mem.store_note(ns, "kept", "A lasting note.")
    time.sleep(0.1)
    result = mem.sweep_expired()
    assert (result.expired_chunks, result.deleted_events, result.deleted_notes) == (2, 2, 1)
    assert result.decayed_chunks == 0
    # The text-less event has no chunk to expire: it stays in the log.
    assert live_sequences(mem, "s") == [1, 3, 4]
    assert mem.get_note(ns, "temp") is None
    assert [n.note_id for n in mem.list_notes(ns)] == ["kept"]
    assert texts(mem.search("drop me", mode="fts")) == []
    assert_consistent(mem)
    again = mem.sweep_expired()
    assert (again.expired_chunks, again.deleted_events) == (0, 0)
    assert result.to_dict()["deleted_notes"] == 1


def test_sweep_now_is_explicit_and_one_chunk_of_many_keeps_its_event(
    mem: mindfile.Mindfile,
) -> None:
    mem.store("s", 1, "hello", ttl=3600)
    mem.store("s", 2, "hello again", ttl=3600)
    assert mem.sweep_expired().expired_chunks == 0
    later = datetime.now(UTC) + timedelta(hours=2)
    result = mem.sweep_expired(now=later)
    assert (result.expired_chunks, result.deleted_events) == (2, 2)
    assert result.now == later.isoformat(timespec="microseconds")
    with pytest.raises(InvalidInputError):
        mem.sweep_expired(now="yesterday")


def test_sweep_clears_neighbour_context_quoting_deleted_text(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "the vault combination is zebra")
    mem.store("s", 2, "secret stuff about the zeppelin", ttl=0.05)
    mem.store("s", 3, "nothing to see here")
    time.sleep(0.1)
    # Until the sweep, the neighbours still quote the expired text in their context
    # columns (the expired chunk itself is hidden).
    assert sorted(texts(mem.search("zeppelin", mode="fts"))) == [
        "nothing to see here",
        "the vault combination is zebra",
    ]
    mem.sweep_expired()
    assert texts(mem.search("zeppelin", mode="fts")) == []
    assert sorted(texts(mem.search("zebra", mode="fts"))) == ["the vault combination is zebra"]
    assert_consistent(mem)


def test_decay_policy_round_trip_and_validation(mem: mindfile.Mindfile) -> None:
    assert mem.get_decay_policy().half_life_seconds is None
    policy = mem.set_decay_policy(half_life=timedelta(days=1), floor=0.2)
    assert (policy.half_life_seconds, policy.floor) == (86400.0, 0.2)
    assert mem.get_decay_policy() == policy
    for bad in (
        {"half_life": 0},
        {"half_life": -1},
        {"half_life": "1d"},
        {"half_life": 10, "floor": 1},
    ):
        with pytest.raises(InvalidInputError):
            mem.set_decay_policy(**bad)  # type: ignore[arg-type]
    assert mem.set_decay_policy(half_life=None).half_life_seconds is None


def test_sweep_drops_items_decayed_below_the_floor(mem: mindfile.Mindfile) -> None:
    mem.set_decay_policy(half_life=timedelta(days=1), floor=0.2)
    mem.store("s", 1, {"role": "user", "content": "old and ordinary"})  # 0.5 -> 0.125
    mem.store("s", 2, {"role": "user", "content": "old and important"}, importance=0.9)  # 0.225
    mem.store("s", 3, {"role": "system", "content": "old and pinned"})  # 0.1, pinned
    mem.store("s", 4, {"role": "user", "content": "old but used lately"})
    mem.store("s", 5, {"role": "user", "content": "fresh"})
    for seq in (1, 2, 3, 4):
        age_event(mem, "s", seq, ago(days=2))
    mem.pin("s", 3)
    mem.record_use([chunk_row(mem, "s", 4)["chunk_id"]])  # used now: no decay since
    result = mem.sweep_expired()
    assert (result.decayed_chunks, result.expired_chunks, result.deleted_events) == (1, 0, 1)
    assert live_sequences(mem, "s") == [2, 3, 4, 5]
    assert_consistent(mem)


def test_decay_without_a_floor_deletes_nothing(mem: mindfile.Mindfile) -> None:
    mem.set_decay_policy(half_life=60, floor=0.0)
    mem.store("s", 1, "ancient")
    age_event(mem, "s", 1, ago(days=365))
    assert mem.sweep_expired().decayed_chunks == 0
    assert live_sequences(mem, "s") == [1]


def test_facts_are_never_swept(mem: mindfile.Mindfile) -> None:
    mem.set_decay_policy(half_life=1, floor=0.5)
    mem.set_fact("ann", "home", "city", "Lisbon")
    raw(mem).execute("UPDATE chunks SET created_at = ?", (ago(days=30),))
    mem.sweep_expired()
    assert [h.text for h in mem.search("Lisbon")] == ["home / city: Lisbon"]


def test_expire_event_helper_hides_immediately(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "visible until expired")
    assert texts(mem.search("visible", mode="fts"))
    expire_event(mem, "s", 1)
    assert texts(mem.search("visible", mode="fts")) == []
