"""Sequences never go backwards: a per-session high-water mark survives deletions.

Deleting a session's newest events (a note, the expiry sweep, quota eviction) must not
let a later write reuse their sequence numbers; only ``forget`` (the session is gone)
starts a session again from scratch. See docs/architecture.md.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from backends import raw
from click.testing import CliRunner

import mindfile
from mindfile.cli.main import cli
from mindfile.errors import ConflictError
from mindfile.storage.db import Database
from mindfile.storage.migrations import apply_migrations, load_migrations

from ._support import assert_consistent


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


NS = "memory:alice"


def last_sequence(mem: mindfile.Mindfile, session_id: str) -> int:
    (info,) = [s for s in mem.list_sessions() if s.session_id == session_id]
    return info.last_sequence


def test_deleting_the_newest_notes_never_reuses_their_sequences(mem: mindfile.Mindfile) -> None:
    seqs = [mem.store_note(NS, f"n{i}", f"Note number {i}.").sequence for i in range(1, 4)]
    assert seqs == [1, 2, 3]
    assert mem.delete_note(NS, "n3") and mem.delete_note(NS, "n2")
    assert last_sequence(mem, NS) == 3
    # store() below the old maximum is refused ...
    with pytest.raises(ConflictError) as info:
        mem.store(NS, 2, "a plain event that would take a deleted note's place")
    assert info.value.details["last_sequence"] == 3
    # ... and the next note gets a fresh number.
    assert mem.store_note(NS, "n4", "Note number four.").sequence == 4
    assert last_sequence(mem, NS) == 4
    assert_consistent(mem)


def test_a_replaced_note_moves_above_the_high_water_mark(mem: mindfile.Mindfile) -> None:
    mem.store_note(NS, "a", "First.")
    mem.store_note(NS, "b", "Second.")
    mem.delete_note(NS, "b")
    assert mem.store_note(NS, "a", "First, rewritten.").sequence == 3


def test_sweeping_the_newest_events_keeps_the_high_water_mark(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "keep me")
    mem.store("s", 2, "short lived", ttl=0.05)
    mem.store("s", 3, "short lived too", ttl=0.05)
    time.sleep(0.1)
    assert mem.sweep_expired().deleted_events == 2
    assert [r.sequence for r in mem.recall("s")] == [1]
    assert last_sequence(mem, "s") == 3
    for old in (2, 3):
        with pytest.raises(ConflictError) as info:
            mem.store("s", old, "reusing a swept sequence")
        assert info.value.details["last_sequence"] == 3
    with pytest.raises(ConflictError):
        mem.store_many([("s", 3, "in a batch too")])
    mem.store("s", 4, "the next one")
    assert [r.sequence for r in mem.recall("s")] == [1, 4]
    assert last_sequence(mem, "s") == 4
    assert_consistent(mem)


def test_last_sequence_never_decreases(mem: mindfile.Mindfile) -> None:
    seen = [-1]
    for seq in range(1, 7):
        mem.store("s", seq, f"message number {seq}", ttl=0.05 if seq % 2 == 0 else None)
        seen.append(last_sequence(mem, "s"))
    time.sleep(0.1)
    mem.sweep_expired()
    seen.append(last_sequence(mem, "s"))
    mem.store_note("s", "n", "A note in the same session.")
    seen.append(last_sequence(mem, "s"))
    mem.delete_note("s", "n")
    seen.append(last_sequence(mem, "s"))
    assert seen == sorted(seen)
    assert seen[-1] == 7


def test_facts_take_sequences_above_the_high_water_mark(mem: mindfile.Mindfile) -> None:
    mem.set_fact("bob", "home", "city", "Porto")
    first = int(
        raw(mem).scalar("SELECT max(sequence_end) FROM chunks WHERE session_id = 'facts:bob'")
    )
    with pytest.raises(ConflictError):
        mem.store("facts:bob", first, "an event at a fact's sequence")
    mem.set_fact("bob", "home", "country", "Portugal")
    second = int(
        raw(mem).scalar("SELECT max(sequence_end) FROM chunks WHERE session_id = 'facts:bob'")
    )
    assert second > first
    assert last_sequence(mem, "facts:bob") == second


def test_forget_starts_the_session_again(mem: mindfile.Mindfile) -> None:
    mem.store("s", 5, "before")
    assert mem.forget("s")
    mem.store("s", 1, "a new session with the same id starts again")
    assert last_sequence(mem, "s") == 1


def test_the_cli_picks_the_next_sequence_above_deleted_events(tmp_path: Path) -> None:
    path = tmp_path / "cli.db"
    with mindfile.open(path, embedder="hash") as mem:
        mem.store("s", 1, "keep")
        mem.store("s", 2, "goes away", ttl=0.05)
        time.sleep(0.1)
        mem.sweep_expired()
    result = CliRunner().invoke(cli, ["add", "s", "next", "--db", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["sequence"] == 3


def test_the_migration_backfills_from_events_and_session_state(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = Database(path)
    try:
        shipped = load_migrations()
        before = next(i for i, m in enumerate(shipped) if m.name == "sequence_high_water")
        apply_migrations(db, shipped[:before])  # a store from before the migration
        now = "2024-01-01T00:00:00.000000+00:00"
        with db.atomic():
            for sid in ("events", "state", "both", "empty"):
                db.execute(
                    "INSERT INTO sessions (session_id, created_at, updated_at) VALUES (?, ?, ?)",
                    (sid, now, now),
                )
            for sid, seq in (("events", 4), ("events", 9), ("both", 2)):
                db.execute(
                    "INSERT INTO conversation_events VALUES (?, ?, '\"x\"', ?)", (sid, seq, now)
                )
            for sid, last in (("state", 12), ("both", 7)):
                db.execute(
                    "INSERT INTO session_state VALUES (?, json_object('last_sequence', ?), ?)",
                    (sid, last, now),
                )
    finally:
        db.close()
    with mindfile.open(path, embedder="hash") as mem:
        assert {s.session_id: s.last_sequence for s in mem.list_sessions()} == {
            "events": 9,
            "state": 12,
            "both": 7,
            "empty": -1,
        }
        with pytest.raises(ConflictError):
            mem.store("state", 12, "below the recorded last sequence")
        mem.store("empty", 0, "the first event of an empty session")
        assert mem.store_note("both", "n", "A note.").sequence == 8


@pytest.mark.sqlite_only("reads the SQLite schema with sqlite3")
def test_the_high_water_column_is_part_of_the_schema(db_path: Path) -> None:
    mindfile.open(db_path, embedder="hash").close()
    con = sqlite3.connect(db_path)
    try:
        columns = {row[1] for row in con.execute("PRAGMA table_info(sessions)")}
    finally:
        con.close()
    assert "sequence_high_water" in columns
