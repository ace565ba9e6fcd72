"""The chunk writers' lock: one transaction at a time writes chunks or vectors.

Migration ``0008_chunk_writer_lock.sql`` makes every statement that writes ``chunks``
(the columns the derived indexes read) or ``chunks_vec`` take a transaction-scoped
advisory lock on :data:`CHUNK_WRITER_KEY` first, so chunk ids and change-log seqs are
handed out in commit order, as under SQLite's single writer (docs/postgres.md,
"Concurrency"). The triggers make that true of every write path, whatever it forgets.

This module is the other half, which keeps the lock free of deadlocks: **the chunk lock
is the first lock a writing transaction takes.** A trigger takes it at the first chunk
write, which may come after the transaction locked other things (a session's advisory
lock, its ``sessions`` row, a quota row). A transaction waiting for the chunk lock while
holding such a lock, and a holder of the chunk lock wanting that same lock, would
deadlock. So every Postgres store method that writes chunks or vectors, or that takes a
per-session lock (:mod:`mindfile.storage.postgres.sessions`), calls :func:`lock_chunk_writes`
before anything else: a transaction waiting for the chunk lock then holds nothing that
the holder could want. Re-taking it inside the same transaction is free.

Why before the per-session locks, not after them: updating a note or a fact deletes its
old chunks (the chunk lock) and only then asks for the session's next sequence (the
session lock), in one transaction (``memory/notes.py``, ``memory/facts.py``); a batch
writer takes session locks and then writes chunks. With the session locks first, those
two would deadlock; with the chunk lock first in both, the second simply waits. Since
every session lock is taken by a holder of the chunk lock, session locks are never
contended any more; they stay, as the rule that makes a sequence safe does not depend
on this one.

The methods that take it: the session store's ``next_sequence``, ``write_events`` and
``add_chunks``; deleting a session or erasing a user (the deletes cascade into chunks);
a fact's writes (its row, then its chunks); a note's removal; consolidation's merge and
summary chunk; deleting chunks (expiry, quotas); completing embedding jobs; dropping
vectors; re-embedding's switch and its hash backfill (rows it locks before the switch).
What is left: a caller's transaction that first locks rows in a store method not listed
(a pin, a scratchpad, a session row) and then writes chunks, while a chunk writer wants
those rows. No Mindfile path does that today; Postgres would detect it after
``deadlock_timeout`` and abort one of the two with a :class:`~mindfile.errors.StorageError`.
"""

from __future__ import annotations

from mindfile.storage.postgres.db import PgDatabase

__all__ = ["CHUNK_WRITER_KEY", "LOCK_CHUNK_WRITES", "lock_chunk_writes"]

#: The advisory lock's key: "mfchunks" in ASCII, big-endian (also in migration 0008).
CHUNK_WRITER_KEY = 7883097498056551283

LOCK_CHUNK_WRITES = f"SELECT pg_advisory_xact_lock({CHUNK_WRITER_KEY})"


def lock_chunk_writes(db: PgDatabase) -> None:
    """Take the chunk writers' lock for the rest of the caller's transaction (call it
    inside ``db.atomic()``, before any other lock; outside one it would be released
    at once, so there it does nothing)."""
    if db.in_write_transaction:
        db.execute(LOCK_CHUNK_WRITES)
