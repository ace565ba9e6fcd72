"""Chunk ids and change-log seqs in commit order (migration 0008, docs/postgres.md,
"Concurrency"): one chunk writer at a time, readers never wait, no deadlock with the
per-session locks.

The derived indexes catch up by "ids above the highest I hold" and by change-log seq.
Several writer processes (tests/postgres/_pg_child.py) insert chunks at once through
the session store while a reader follows them the way the indexes do; it must see every
committed chunk and vector exactly once.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindfile.errors import StorageError
from mindfile.index.pipeline import PreparedEvent, prepare_event
from mindfile.memory._write import scoped_chunks
from mindfile.storage.index_source import index_source
from mindfile.storage.postgres import PgDatabase, apply_pg_migrations
from mindfile.storage.postgres.migrations import load_pg_migrations
from mindfile.storage.postgres.stores import pg_stores
from mindfile.storage.postgres.writer_lock import CHUNK_WRITER_KEY

from ._children import run_children

CHILD = Path(__file__).with_name("_pg_child.py")
NOW = "2026-01-01T00:00:00.000000+00:00"
WRITERS = 4
EVENTS = 60

# The chunk writers' lock as pg_locks shows it: the key's high and low 32 bits.
WAITING = f"""
SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted
  AND classid = {CHUNK_WRITER_KEY >> 32} AND objid = {CHUNK_WRITER_KEY & 0xFFFFFFFF}
"""


@pytest.fixture
def db(pg_url: str) -> Iterator[PgDatabase]:
    with PgDatabase(pg_url) as opened:
        apply_pg_migrations(opened)
        yield opened


def _wait_until(check: object, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


def test_the_lock_key_is_the_migration_s() -> None:
    [migration] = [m for m in load_pg_migrations() if m.version == 8]
    keys = set(re.findall(r"pg_advisory_xact_lock\((\d+)\)", migration.sql))
    assert keys == {str(CHUNK_WRITER_KEY)}
    assert CHUNK_WRITER_KEY.to_bytes(8, "big") == b"mfchunks"


def test_a_reader_following_ids_sees_every_committed_chunk_once(
    db: PgDatabase, pg_url: str
) -> None:
    """Four processes write chunks with vectors (each transaction stays open a moment
    after its insert) while the reader loops ``chunks_after`` / ``vectors_after`` /
    ``vector_changes_since`` from its cursors, as the derived indexes catch up.

    Without the chunk writers' lock this fails: a writer's id committed after a higher
    id of another writer is behind the reader's cursor. Measured with the triggers
    dropped and the explicit lock made a no-op (two runs): 25 and 28 of the 240 chunks
    missed by ``chunks_after``, 31 and 33 by ``vectors_after``, 22 and 14 by the vector
    change log (its seqs are out of commit order too)."""
    source = index_source(db)
    chunks: list[int] = []
    vectors: list[int] = []
    logged: list[int] = []
    cursor = vector_cursor = reads = 0
    seen, _ = source.vector_changes_since(None)

    def follow() -> None:
        nonlocal cursor, vector_cursor, seen
        rows = source.chunks_after(cursor, 1_000)
        if rows:
            chunks.extend(r[0] for r in rows)
            cursor = rows[-1][0]
        batch = source.vectors_after(vector_cursor, 8, 1_000)
        if len(batch.ids):
            vectors.extend(int(i) for i in batch.ids)
            vector_cursor = int(batch.ids[-1])
        newest, changed = source.vector_changes_since(seen)
        assert changed is not None
        logged.extend(changed)
        seen = newest

    def read_while_writing() -> None:
        nonlocal reads
        follow()
        reads += 1

    argvs = [["ingest", pg_url, f"w{i}", str(EVENTS), "4"] for i in range(WRITERS)]
    answers = run_children(CHILD, *argvs, during=read_while_writing)
    follow()  # what committed after the last read in the loop
    committed = sorted(int(r[0]) for r in db.query("SELECT id FROM chunks"))
    assert len(committed) == WRITERS * EVENTS
    assert sorted(i for answer in answers for i in answer) == committed
    assert reads > 10  # the reader really ran alongside the writers
    assert Counter(chunks) == Counter(committed)  # each exactly once, none missed
    assert Counter(vectors) == Counter(committed)
    assert sorted(logged) == committed  # every vector's insert, once, in the change log


def _write(db: PgDatabase, session: str, sequence: int, text: str) -> None:
    event = prepare_event(session, sequence, {"role": "user", "content": text})
    pg_stores(db).sessions.write_events([event], None, "none", NOW)


def test_chunk_writers_take_turns_and_readers_do_not_wait(db: PgDatabase) -> None:
    _write(db, "s", 1, "first")
    source = index_source(db)
    holding, release = threading.Event(), threading.Event()
    done: list[str] = []

    def first() -> None:
        with db.atomic():
            _write(db, "s", 2, "second, held open")
            holding.set()
            release.wait(30)
        done.append("first")

    def second() -> None:
        with db.atomic():
            _write(db, "t", 1, "another session")
        done.append("second")

    one = threading.Thread(target=first)
    one.start()
    assert holding.wait(30)
    two = threading.Thread(target=second)
    two.start()
    _wait_until(lambda: db.scalar(WAITING) == 1, "the second writer waits for the lock")
    # Readers take no lock: they see the committed state at once.
    assert [r[2] for r in source.chunks_after(0, 10)] == ["first"]
    assert done == []
    release.set()
    one.join(30)
    two.join(30)
    assert done == ["first", "second"]
    texts = [r[2] for r in source.chunks_after(0, 10)]
    assert texts == ["first", "second, held open", "another session"]  # ids in commit order


def test_writes_the_indexes_do_not_read_take_no_lock(db: PgDatabase) -> None:
    """Pins, importance and use counts change on the read path: they never wait for a
    chunk writer."""
    _write(db, "s", 1, "a chunk to pin")
    chunk_id = str(db.scalar("SELECT chunk_id FROM chunks"))
    stores = pg_stores(db)
    holding, release = threading.Event(), threading.Event()

    def writer() -> None:
        with db.atomic():
            _write(db, "t", 1, "held open")  # another session: no row in common
            holding.set()
            release.wait(30)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(30)
        with db.atomic():
            db.execute("SET LOCAL lock_timeout = '2s'")
            stores.marks.set_pinned("s", 1, True)
            stores.marks.set_importance("s", 1, 0.9)
            assert stores.marks.record_use([chunk_id], NOW, 0.01) == 1
        # ... while a text change must wait for it.
        with pytest.raises(StorageError, match="lock timeout"), db.atomic():
            db.execute("SET LOCAL lock_timeout = '200ms'")
            db.execute("UPDATE chunks SET context_after = 'x'")
    finally:
        release.set()
        thread.join(30)


def test_a_note_update_and_a_batch_writer_never_deadlock(db: PgDatabase) -> None:
    """A note's update deletes its old chunks (the chunk lock) and then asks for the
    session's next sequence (the session lock); a batch writer of the same session
    takes both too. The chunk lock comes first in both, so the writer waits, holding
    nothing the note's update needs (with the session lock first it would deadlock)."""
    stores = pg_stores(db)
    with db.atomic():
        sequence = stores.sessions.next_sequence("n")
        chunks = scoped_chunks(
            ["old text"], "note\x00k", json.dumps({"kind": "note", "note_id": "k"})
        )
        stores.sessions.write_event(
            PreparedEvent("n", sequence, "{}", chunks), None, "none", NOW, neighbor_context=False
        )
        stores.notes.link("n", "k", sequence)
    removed, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def update_note() -> None:
        try:
            with db.atomic():
                stores.notes.remove("n", "k", sequence)
                removed.set()
                release.wait(30)
                new = stores.sessions.next_sequence("n")
                _write(db, "n", new, "new text")
        except BaseException as exc:
            failures.append(exc)

    def batch() -> None:
        try:
            with db.atomic():
                _write(db, "n", 50, "a batch event")
        except BaseException as exc:
            failures.append(exc)

    one = threading.Thread(target=update_note)
    one.start()
    assert removed.wait(30)
    two = threading.Thread(target=batch)
    two.start()
    _wait_until(lambda: db.scalar(WAITING) == 1, "the batch writer waits for the chunk lock")
    release.set()
    one.join(30)
    two.join(30)
    assert failures == []
    texts = {str(r[0]) for r in db.query("SELECT chunk_text FROM chunks WHERE session_id = 'n'")}
    assert texts == {"new text", "a batch event"}


def test_deleting_a_session_waits_for_the_chunk_writer_before_locking_rows(
    db: PgDatabase,
) -> None:
    """Deleting a session cascades into its chunks: it takes the chunk lock before the
    session's row, so a writer of that session holding the chunk lock (and wanting the
    row) is not deadlocked by it."""
    _write(db, "s", 1, "first")
    stores = pg_stores(db)
    holding, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            with db.atomic():
                pg_stores(db).lifecycle.delete_chunks(
                    [int(db.scalar("SELECT min(id) FROM chunks"))]
                )
                holding.set()
                release.wait(30)
                _write(db, "s", 2, "written after the delete began")  # wants the row
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    assert holding.wait(30)

    def delete() -> None:
        try:
            stores.privacy.delete_session("s")
        except BaseException as exc:
            failures.append(exc)

    deleter = threading.Thread(target=delete)
    deleter.start()
    _wait_until(lambda: db.scalar(WAITING) == 1, "the delete waits for the chunk lock")
    release.set()
    thread.join(30)
    deleter.join(30)
    assert failures == []
    assert db.scalar("SELECT count(*) FROM sessions") == 0
