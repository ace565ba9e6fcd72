"""The 0004 schema: event-chunk links kept by triggers, and the upgrade of older stores."""

from __future__ import annotations

from pathlib import Path

import mindfile
from mindfile.storage.db import Database
from mindfile.storage.migrations import apply_migrations, load_migrations

from ._support import assert_consistent


def links(mem_or_db: mindfile.Mindfile | Database) -> set[tuple[str, int, int]]:
    db = mem_or_db.db if isinstance(mem_or_db, mindfile.Mindfile) else mem_or_db
    return {
        (str(s), int(q), int(c))
        for s, q, c in db.query("SELECT session_id, sequence, chunk_rowid FROM event_chunks")
    }


def test_every_write_path_links_its_chunks(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "hello")
    mem.store("s", 2, "world")
    mem.store("s", 3, "hello")  # dedup: the first chunk now holds events 1 and 3
    mem.store_note("memory:ann", "n1", "a note")
    mem.set_fact("ann", "k", "v", "a fact")  # facts have no events: no links
    ids = dict(mem.db.query("SELECT chunk_text, id FROM chunks"))
    assert links(mem) == {
        ("s", 1, ids["hello"]),
        ("s", 3, ids["hello"]),
        ("s", 2, ids["world"]),
        ("memory:ann", 1, ids["a note"]),
    }
    mem.delete_note("memory:ann", "n1")
    mem.forget("s")
    assert links(mem) == set()
    assert_consistent(mem)


def test_upgrading_an_older_store_links_its_chunks(tmp_path: Path) -> None:
    db = Database(tmp_path / "old.db")
    apply_migrations(db, load_migrations()[:3])
    now = "2024-01-01T00:00:00.000000+00:00"
    with db.atomic():
        db.execute("INSERT INTO sessions VALUES ('s', NULL, ?, ?)", (now, now))
        for seq in (1, 2, 3):
            db.execute("INSERT INTO conversation_events VALUES ('s', ?, '\"x\"', ?)", (seq, now))
        for rowid, text, start, end in ((1, "shared", 1, 3), (2, "middle", 2, 2)):
            db.execute(
                "INSERT INTO chunks (id, chunk_id, session_id, chunk_text, content_hash, "
                "sequence_start, sequence_end, created_at) VALUES (?, ?, 's', ?, ?, ?, ?, ?)",
                (rowid, f"ch_{rowid}", text, text, start, end, now),
            )
    apply_migrations(db)
    assert links(db) == {("s", 1, 1), ("s", 3, 1), ("s", 2, 2)}
    assert db.query("SELECT importance, pinned, expires_at, access_count FROM chunks") == [
        (0.5, 0, None, 0),
        (0.5, 0, None, 0),
    ]
    db.close()
