"""Deleted means gone: no byte of deleted text stays in the store's files (issue 8 part 2).

Each path writes a unique marker word, deletes it, closes the store (which purges
FTS5 segments and truncates the WAL when something was deleted) and scans the raw
``.db``, ``-wal`` and ``-shm`` files. A control run with the purge disabled shows the
scan would see the marker (FTS5 keeps deleted terms in its segments), so the test can
fail.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from backends import raw

import mindfile
from mindfile.scheduler import ScheduleCadence, new_schedule
from mindfile.storage import erase


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


def marker() -> str:
    # Letters only (one FTS5 token); a fresh random prefix so FTS5's prefix compression
    # of neighbouring terms cannot hide it; consonants without "s", so the porter
    # stemmer stores the word unchanged (a final "s" would be stripped, and the scans
    # below would look for a word the index never held).
    return "zq" + "".join(secrets.choice("bcdfghjklmnpqrtvwxz") for _ in range(14))


def residue(path: Path, word: str) -> list[str]:
    """The files (db, -wal, -shm, journal) whose bytes contain ``word``."""
    found = []
    for suffix in ("", "-wal", "-shm", "-journal"):
        f = Path(str(path) + suffix)
        if f.exists() and word.encode() in f.read_bytes():
            found.append(f.name)
    return found


def fts_residue(path: Path, word: str) -> int:
    """FTS5 index blocks holding ``word``, read through SQL (robust to how the bytes
    are laid out on pages: a term can straddle an overflow-page boundary on disk)."""
    import apsw

    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        query = "SELECT count(*) FROM chunks_fts_data WHERE instr(block, ?) > 0"
        return int(conn.execute(query, (word.encode(),)).fetchall()[0][0])
    finally:
        conn.close()


def filler(mem: mindfile.Mindfile) -> None:
    """Other users' data around the deleted one, so pages are shared and reused."""
    for s in range(3):
        mem.store_many(
            [
                (f"other-{s}", i, {"role": "user", "content": f"other text {s} {i}"})
                for i in range(20)
            ],
            user_id="other",
        )
    mem.store_note("memory:other", "n", "a note that stays")
    mem.set_fact("other", "home", "city", "Faro")


def forget_session(mem: mindfile.Mindfile, word: str) -> None:
    mem.store("victim", 1, {"role": "user", "content": f"my secret is {word}"}, user_id="v")
    mem.store("victim", 2, {"role": "assistant", "content": f"noted: {word}"})
    assert mem.search(word, user_id="v")
    assert mem.forget("victim")


def delete_note(mem: mindfile.Mindfile, word: str) -> None:
    mem.store_note("memory:v", "secret", f"the code word is {word}")
    assert mem.delete_note("memory:v", "secret")


def delete_fact(mem: mindfile.Mindfile, word: str) -> None:
    mem.set_fact("v", "secret", "word", f"first {word}")
    mem.set_fact("v", "secret", "word", f"second {word}")  # the first goes to history
    assert mem.delete_fact("v", "secret", "word")


def forget_facts_session(mem: mindfile.Mindfile, word: str) -> None:
    mem.set_fact("v", "secret", "word", f"first {word}")
    mem.set_fact("v", "secret", "word", f"second {word}")
    assert mem.forget("facts:v")


def forget_user(mem: mindfile.Mindfile, word: str) -> None:
    mem.store("v-chat", 1, {"role": "user", "content": f"chat {word}"}, user_id="v")
    mem.store_note("memory:v", "n", f"note {word}")
    mem.set_fact("v", "c", "k", f"fact {word}")
    mem.set_fact("v", "c", "k", f"newer fact {word}")
    mem.write_scratchpad("v-chat", [f"scratch {word}"])
    mem.write_summary_state("v-chat", mindfile.SummaryState(f"summary {word}", 1), 0)
    mem.schedules.create(
        new_schedule(user_id="v", goal=f"remind me {word}", cadence=ScheduleCadence.interval(3600))
    )
    counts = mem.forget_user("v")
    assert counts["sessions"] == 3 and counts["facts"] == 1 and counts["fact_history"] == 1
    assert counts["schedules"] == 1
    assert mem.list_sessions(user_id="v") == []


def sweep_expired(mem: mindfile.Mindfile, word: str) -> None:
    mem.store("victim", 1, {"role": "user", "content": f"temporary {word}"}, ttl=60)
    later = datetime.now(UTC) + timedelta(hours=1)
    assert mem.sweep_expired(now=later).expired_chunks >= 1


PATHS: dict[str, Callable[[mindfile.Mindfile, str], None]] = {
    "forget": forget_session,
    "delete_note": delete_note,
    "delete_fact": delete_fact,
    "forget_facts_session": forget_facts_session,
    "forget_user": forget_user,
    "sweep_expired": sweep_expired,
}


@pytest.mark.parametrize("path_name", sorted(PATHS))
def test_deleted_text_leaves_no_bytes(tmp_path: Path, path_name: str) -> None:
    db = tmp_path / "store.db"
    word = marker()
    with mindfile.open(db, embedder="hash") as mem:
        filler(mem)
        PATHS[path_name](mem, word)
        assert not mem.search(word, mode="fts")
    assert residue(db, word) == []
    assert fts_residue(db, word) == 0
    with mindfile.open(db, embedder="hash") as mem:  # the rest is intact
        assert mem.search("other text", user_id="other", mode="fts")
        assert mem.get_fact("other", "home", "city") is not None


def test_without_the_purge_the_scan_finds_the_deleted_terms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: FTS5 segments keep deleted terms until merged."""
    monkeypatch.setattr(erase, "purge", lambda db: None)
    db = tmp_path / "store.db"
    word = marker()
    with mindfile.open(db, embedder="hash") as mem:
        filler(mem)
        forget_session(mem, word)
        raw(mem).execute("PRAGMA wal_checkpoint(TRUNCATE)")
    # Through SQL: the raw byte scan can miss a term that straddles two pages.
    assert fts_residue(db, word) > 0


def test_purge_runs_once_per_delete_and_explicitly(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    with mindfile.open(db, embedder="hash") as mem:
        mem.store("s", 1, {"role": "user", "content": "hello"})
        assert not erase.purge_pending(mem.db)
        mem.forget("s")
        assert erase.purge_pending(mem.db)
        mem.purge()
        assert not erase.purge_pending(mem.db)
