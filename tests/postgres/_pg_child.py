"""Run as a script: one of several processes writing to the same Postgres database.

``python _pg_child.py MODE URL ARGS...``; prints one JSON line with what it did. With
``MINDFILE_TEST_GO=PATH`` every child connects, then waits for PATH to exist, so they
all start writing at once.

* ``cas URL SESSION ROUNDS`` - until the summary epoch reaches ROUNDS: read the epoch,
  try to move it one step with the compare-and-swap; prints the epochs it won.
* ``claim URL RUNNER LIMIT`` - claim due schedules, LIMIT at a time, until none is left; prints
  the schedule ids it was handed.
* ``use URL CHUNK_ID TIMES`` - record one use of a chunk TIMES times (read-modify-write
  in SQL); prints how many calls found the chunk.
* ``append URL SESSION COUNT NAME`` - store COUNT events in SESSION, each at the
  session's next sequence; prints the sequences it got.
* ``work URL WORKER LIMIT`` - claim and complete embedding jobs, LIMIT at a time, until
  none is due; prints the job ids it completed.
* ``ingest URL SESSION COUNT PAUSE_MS`` - store COUNT events with one chunk and its
  vector each in SESSION through the session store's batch writer, one transaction per
  event that stays open up to PAUSE_MS after the write (other work of the same
  transaction); prints the chunk ids it committed.
* ``migrate URL`` - apply the migrations; prints the schema version.
* ``hold URL MARKER`` - open a transaction, write a row, lock a fact, write MARKER, and
  sleep until killed (the parent kills it with SIGKILL mid-transaction).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

from mindfile.index.pipeline import prepare_event
from mindfile.storage.postgres import PgDatabase, apply_pg_migrations
from mindfile.storage.postgres.scheduler import PgSchedulerStore
from mindfile.storage.postgres.stores import pg_stores

NOW = "2026-01-01T00:00:00.000000+00:00"
FAR = "2030-01-01T00:00:00+00:00"


def cas(db: PgDatabase, session: str, rounds: int, me: str) -> list[int]:
    states = pg_stores(db).session_state
    won: list[int] = []
    while (epoch := states.summary_epoch(session)) < rounds:
        state = json.dumps({"epoch": epoch + 1, "by": me})
        if states.swap_summary(session, epoch, state, NOW):
            won.append(epoch)
    return won


def claim(db: PgDatabase, runner: str, limit: int) -> list[str]:
    store = PgSchedulerStore(db)
    got: list[str] = []
    while batch := store.claim_due(FAR, runner_id=runner, lease_secs=3600, limit=limit):
        got.extend(c.schedule.schedule_id for c in batch)
        time.sleep(0.002)  # let the others in: on a busy machine one could drain it alone
    return got


def use(db: PgDatabase, chunk_id: str, times: int) -> int:
    marks = pg_stores(db).marks
    return sum(marks.record_use([chunk_id], NOW, 0.01) for _ in range(times))


def append(db: PgDatabase, session: str, count: int, me: str) -> list[int]:
    """Store ``count`` events in the session, each at the next free sequence."""
    sessions = pg_stores(db).sessions
    got: list[int] = []
    for i in range(count):
        with db.atomic():
            sequence = sessions.next_sequence(session)
            event = prepare_event(session, sequence, {"role": "user", "content": f"{me} {i}"})
            sessions.write_event(event, None, "none", NOW)  # no vectors: jobs instead
        got.append(sequence)
    return got


def ingest(db: PgDatabase, session: str, count: int, pause_ms: float) -> list[int]:
    """Store ``count`` one-chunk events with vectors; the chunk ids committed."""
    sessions = pg_stores(db).sessions
    rng = random.Random(f"{session}:{count}")
    got: list[int] = []
    for i in range(1, count + 1):
        event = prepare_event(session, i, {"role": "user", "content": f"{session} event {i}"})
        vector = np.asarray([[rng.random() + 0.01 for _ in range(8)]], dtype=np.float32)
        vector /= np.linalg.norm(vector)
        with db.atomic():
            sessions.write_events([event], vector, "test-8", NOW)
            # The rest of the transaction's work (quotas, a caller's other writes): the
            # window in which another writer's later id could commit first.
            time.sleep(rng.random() * pause_ms / 1000)
            [rowid] = db.query(
                "SELECT id FROM chunks WHERE session_id = %s AND sequence_end = %s", (session, i)
            )[0]
        got.append(int(rowid))
    return got


def work(db: PgDatabase, worker: str, limit: int) -> list[int]:
    """Claim and complete embedding jobs until none is due; the job ids it completed."""
    jobs = pg_stores(db).jobs
    blob = bytes(4 * 8)  # an 8-d zero vector
    got: list[int] = []
    while True:
        token = f"{worker}:{len(got)}"
        leased, _ = jobs.claim(
            token, worker, now=NOW, expires=FAR, limit=limit, max_retries=3,
            gone=lambda _owner: False,
        )  # fmt: skip
        if not leased:
            return got
        assert jobs.complete(token, leased, [blob] * len(leased), "zero", NOW) == len(leased)
        got.extend(j.job_id for j in leased)
        time.sleep(0.002)  # let the others in: on a busy machine one could drain it alone


def hold(db: PgDatabase, marker: Path) -> None:
    stores = pg_stores(db)
    with db.atomic():
        stores.llm_failures.record(
            task="doomed", reason="killed", message="never committed", model=None,
            scope=None, session_id=None, raw_excerpt=None, details={}, created_at=NOW,
        )  # fmt: skip
        fact = stores.facts.get("u1", "c", "k")
        assert fact is not None
        stores.facts.update(fact.id, "uncommitted", "agent", NOW)  # holds the row lock
        marker.write_text("in transaction")
        time.sleep(120)


def _start_together() -> None:
    """With ``MINDFILE_TEST_GO`` set: say ready, then wait for the parent's go."""
    go = os.environ.get("MINDFILE_TEST_GO")
    if not go:
        return
    Path(f"{go}.ready.{os.getpid()}").touch()
    deadline = time.monotonic() + 60
    while not Path(go).exists():
        if time.monotonic() > deadline:
            raise SystemExit("no go from the parent")
        time.sleep(0.002)


def main(argv: list[str]) -> None:
    mode, url, *args = argv
    with PgDatabase(url, max_size=2) as db:
        _start_together()
        if mode == "cas":
            out: object = cas(db, args[0], int(args[1]), args[2])
        elif mode == "claim":
            out = claim(db, args[0], int(args[1]))
        elif mode == "use":
            out = use(db, args[0], int(args[1]))
        elif mode == "append":
            out = append(db, args[0], int(args[1]), args[2])
        elif mode == "ingest":
            out = ingest(db, args[0], int(args[1]), float(args[2]))
        elif mode == "work":
            out = work(db, args[0], int(args[1]))
        elif mode == "migrate":
            out = apply_pg_migrations(db)
        elif mode == "hold":
            hold(db, Path(args[0]))
            out = None
        else:
            raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
