"""The job store: the durable embedding-job queue (``memory_jobs``, migration 0005).

:mod:`mindfile.jobs.queue` holds the rules (lease length, retries and backoff, which
worker is dead); this store applies them to the rows. Each method that changes several
rows runs in one transaction of its own (nested as a savepoint inside a caller's), so a
claim is atomic between threads and processes: two workers never hold the same job.
A job's writes are conditional on its claim token, so a worker whose lease went to
another worker changes nothing. Every time is ISO-8601 UTC text with microseconds, so
comparing text compares time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from mindfile.storage import changes
from mindfile.storage.db import Database

__all__ = [
    "CHANGE_LOG_KEEP",
    "ClaimedJob",
    "FailedAttempt",
    "JobRow",
    "JobStore",
    "QueueCounts",
    "SqliteJobStore",
]

#: Rows of ``chunks_vec_changes`` kept after each completed batch.
CHANGE_LOG_KEEP = changes.KEEP


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """A leased job and the text to embed."""

    job_id: int
    chunk_rowid: int
    retry_count: int
    text: str


@dataclass(frozen=True, slots=True)
class FailedAttempt:
    """A failed attempt of a leased job: its new status, retry count and due time."""

    job_id: int
    status: str
    retry_count: int
    next_retry_at: str


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """Jobs by status, those due, the oldest waiting job and the next retry."""

    by_status: dict[str, int]
    due: int
    oldest_waiting_at: str | None
    next_retry_at: str | None


@dataclass(frozen=True, slots=True)
class JobRow:
    """A job with its chunk (:class:`mindfile.jobs.types.JobInfo` has the same fields)."""

    job_id: int
    chunk_rowid: int
    chunk_id: str
    session_id: str
    status: str
    retry_count: int
    next_retry_at: str
    last_error: str | None
    claimed_by: str | None
    claim_expires_at: str | None
    created_at: str
    updated_at: str


class JobStore(Protocol):
    """The embedding-job queue (backend-neutral)."""

    def recover_abandoned(
        self, now: str, max_retries: int, gone: Callable[[str], bool]
    ) -> list[str]:
        """Requeue running jobs whose lease expired or whose holder is ``gone``
        (the lost attempt counts; out of retries: ``failed``); their new statuses."""
        ...

    def running_leases(self) -> list[tuple[str | None, str | None]]:
        """``(claimed_by, claim_expires_at)`` of every running job."""
        ...

    def claim(
        self,
        token: str,
        worker: str,
        *,
        now: str,
        expires: str,
        limit: int,
        max_retries: int,
        gone: Callable[[str], bool],
    ) -> tuple[list[ClaimedJob], list[str]]:
        """In one transaction: :meth:`recover_abandoned`, then lease up to ``limit``
        due first attempts, or the first due job alone when it is a retry. Returns the
        leased jobs whose chunk still exists (by job id) and the recovered statuses."""
        ...

    def complete(
        self,
        token: str,
        jobs: Sequence[ClaimedJob],
        blobs: Sequence[bytes],
        model_id: str,
        now: str,
        *,
        keep_changes: int = CHANGE_LOG_KEEP,
    ) -> int:
        """Write each job's vector and mark it done, only while the claim is ``token``'s;
        returns how many were. A vector is rewritten only when another model made it.
        The vector change log is then pruned to its last ``keep_changes`` rows."""
        ...

    def fail(
        self, token: str, attempts: Sequence[FailedAttempt], error: str, now: str
    ) -> list[str]:
        """Record failed attempts (claims still ``token``'s); the statuses applied."""
        ...

    def release(self, token: str, job_ids: Sequence[int], now: str) -> None:
        """Hand leased jobs back to pending untouched."""
        ...

    def enqueue(self, rowids: Sequence[int], now: str) -> int:
        """Queue a job per chunk, or reset its job (done or failed) to a fresh pending one."""
        ...

    def retry_failed(self, now: str) -> int:
        """Move every dead-lettered job back to pending with its retries reset."""
        ...

    def prune_done(self, before: str) -> int:
        """Delete ``done`` jobs last updated before ``before``; returns how many."""
        ...

    def counts(self, now: str) -> QueueCounts:
        """The queue's state at ``now``."""
        ...

    def list_jobs(self, status: str | None, limit: int) -> list[JobRow]:
        """Jobs in id order, optionally only those with ``status``."""
        ...


# Dead workers: a running job whose lease expired goes back to pending (the lost
# attempt counts as a failure), or to the dead letter when out of retries.
RECOVER_EXPIRED = """
UPDATE memory_jobs SET
    retry_count = retry_count + 1,
    status = CASE WHEN retry_count + 1 > :max_retries THEN 'failed' ELSE 'pending' END,
    next_retry_at = :now,
    last_error = 'lease expired: worker ' || coalesce(claimed_by, '?')
                 || ' stopped before finishing',
    claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL,
    updated_at = :now
WHERE status = 'running' AND claim_expires_at <= :now
RETURNING status
"""

# Holders of live leases, checked for liveness (mindfile.jobs.owner).
RUNNING_OWNERS = """
SELECT DISTINCT claimed_by FROM memory_jobs
WHERE status = 'running' AND claim_expires_at > ?1 AND claimed_by IS NOT NULL
"""

# A worker that is gone (killed) before its lease expired: recovered like an expired
# lease, at once.
RECOVER_ORPHANED = """
UPDATE memory_jobs SET
    retry_count = retry_count + 1,
    status = CASE WHEN retry_count + 1 > :max_retries THEN 'failed' ELSE 'pending' END,
    next_retry_at = :now,
    last_error = 'worker ' || claimed_by || ' is gone (killed before finishing)',
    claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL,
    updated_at = :now
WHERE status = 'running' AND claimed_by IN (SELECT value FROM json_each(:owners))
RETURNING status
"""

RUNNING_LEASES = """
SELECT claimed_by, claim_expires_at FROM memory_jobs WHERE status = 'running'
"""

FIRST_DUE = """
SELECT job_id, retry_count FROM memory_jobs
WHERE status = 'pending' AND next_retry_at <= ?
ORDER BY next_retry_at, job_id
LIMIT 1
"""

_LEASE = """
UPDATE memory_jobs SET
    status = 'running', claim_token = :token, claimed_by = :worker,
    claim_expires_at = :expires, updated_at = :now
"""

# A retried job is claimed alone, so one chunk the embedder rejects cannot keep failing
# (and finally dead-letter) the batch it arrived with.
CLAIM_ONE = (
    _LEASE
    + """WHERE job_id = :job_id AND status = 'pending'
RETURNING job_id, chunk_rowid, retry_count
"""
)

CLAIM_FRESH = (
    _LEASE
    + """WHERE job_id IN (
    SELECT job_id FROM memory_jobs
    WHERE status = 'pending' AND retry_count = 0 AND next_retry_at <= :now
    ORDER BY next_retry_at, job_id
    LIMIT :limit
)
RETURNING job_id, chunk_rowid, retry_count
"""
)

CHUNK_TEXTS = """
SELECT id, chunk_text FROM chunks WHERE id IN (SELECT value FROM json_each(?))
"""

# Written only while the job is still ours; ON CONFLICT rewrites a vector only when it
# was made by another model (a repair), so a replayed job is a no-op.
UPSERT_VECTOR = """
INSERT INTO chunks_vec (chunk_rowid, embedding_blob, embedding_model)
SELECT ?1, ?2, ?3 WHERE EXISTS (
    SELECT 1 FROM memory_jobs WHERE job_id = ?4 AND claim_token = ?5 AND status = 'running'
)
ON CONFLICT (chunk_rowid) DO UPDATE SET
    embedding_blob = excluded.embedding_blob,
    embedding_model = excluded.embedding_model
WHERE chunks_vec.embedding_model != excluded.embedding_model
"""

MARK_DONE = """
UPDATE memory_jobs SET
    status = 'done', claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL,
    updated_at = ?1
WHERE job_id = ?2 AND claim_token = ?3 AND status = 'running'
"""

MARK_FAILED_ATTEMPT = """
UPDATE memory_jobs SET
    status = ?1, retry_count = ?2, next_retry_at = ?3, last_error = ?4,
    claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL, updated_at = ?5
WHERE job_id = ?6 AND claim_token = ?7 AND status = 'running'
"""

# Handing a claim back untouched (the worker was interrupted, not the embedder).
RELEASE = """
UPDATE memory_jobs SET
    status = 'pending', claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL,
    updated_at = ?1
WHERE job_id = ?2 AND claim_token = ?3 AND status = 'running'
"""

# The reconciler's enqueue: a new job, or an old one (done / failed) reset to pending.
ENQUEUE = """
INSERT INTO memory_jobs (chunk_rowid, status, next_retry_at, created_at, updated_at)
VALUES (?1, 'pending', ?2, ?2, ?2)
ON CONFLICT (chunk_rowid) DO UPDATE SET
    status = 'pending', retry_count = 0, next_retry_at = ?2, last_error = NULL,
    claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL, updated_at = ?2
"""

RETRY_FAILED = """
UPDATE memory_jobs SET
    status = 'pending', retry_count = 0, next_retry_at = ?1, updated_at = ?1
WHERE status = 'failed'
"""

PRUNE_DONE = "DELETE FROM memory_jobs WHERE status = 'done' AND updated_at < ?"

COUNT_BY_STATUS = "SELECT status, count(*) FROM memory_jobs GROUP BY status"

COUNT_DUE = """
SELECT
    (SELECT count(*) FROM memory_jobs WHERE status = 'pending' AND next_retry_at <= ?1)
  + (SELECT count(*) FROM memory_jobs WHERE status = 'running' AND claim_expires_at <= ?1)
"""

OLDEST_WAITING = """
SELECT min(created_at) FROM memory_jobs WHERE status IN ('pending', 'running')
"""

NEXT_RETRY = """
SELECT min(next_retry_at) FROM memory_jobs WHERE status = 'pending' AND next_retry_at > ?
"""

LIST_JOBS = """
SELECT j.job_id, j.chunk_rowid, c.chunk_id, c.session_id, j.status, j.retry_count,
       j.next_retry_at, j.last_error, j.claimed_by, j.claim_expires_at, j.created_at,
       j.updated_at
FROM memory_jobs AS j JOIN chunks AS c ON c.id = j.chunk_rowid
WHERE (?1 IS NULL OR j.status = ?1)
ORDER BY j.job_id
LIMIT ?2
"""


class SqliteJobStore:
    """:class:`JobStore` on ``memory_jobs`` (and ``chunks_vec`` for completed jobs)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def recover_abandoned(
        self, now: str, max_retries: int, gone: Callable[[str], bool]
    ) -> list[str]:
        db = self.db
        args = {"now": now, "max_retries": max_retries}
        with db.atomic():
            statuses = [str(r[0]) for r in db.query(RECOVER_EXPIRED, args)]
            owners = [str(r[0]) for r in db.query(RUNNING_OWNERS, (now,))]
            dead = [o for o in owners if gone(o)]
            if dead:
                found = db.query(RECOVER_ORPHANED, {**args, "owners": json.dumps(dead)})
                statuses.extend(str(r[0]) for r in found)
        return statuses

    def running_leases(self) -> list[tuple[str | None, str | None]]:
        return [
            (None if o is None else str(o), None if e is None else str(e))
            for o, e in self.db.query(RUNNING_LEASES)
        ]

    def claim(
        self,
        token: str,
        worker: str,
        *,
        now: str,
        expires: str,
        limit: int,
        max_retries: int,
        gone: Callable[[str], bool],
    ) -> tuple[list[ClaimedJob], list[str]]:
        db = self.db
        with db.atomic():
            statuses = self.recover_abandoned(now, max_retries, gone)
            first = db.query_one(FIRST_DUE, (now,))
            rows: list[tuple[int, int, int]] = []
            if first is not None:
                lease = {"token": token, "worker": worker, "expires": expires, "now": now}
                if int(first[1]) > 0:
                    found = db.query(CLAIM_ONE, {**lease, "job_id": int(first[0])})
                else:
                    found = db.query(CLAIM_FRESH, {**lease, "limit": limit})
                rows = sorted((int(a), int(b), int(c)) for a, b, c in found)
            texts: dict[int, str] = {}
            if rows:
                ids = json.dumps([r[1] for r in rows])
                texts = {int(i): str(t) for i, t in db.query(CHUNK_TEXTS, (ids,))}
        jobs = [ClaimedJob(j, c, n, texts[c]) for j, c, n in rows if c in texts]
        return jobs, statuses

    def complete(
        self,
        token: str,
        jobs: Sequence[ClaimedJob],
        blobs: Sequence[bytes],
        model_id: str,
        now: str,
        *,
        keep_changes: int = CHANGE_LOG_KEEP,
    ) -> int:
        db = self.db
        done = 0
        with db.atomic():
            for job, blob in zip(jobs, blobs, strict=True):
                db.execute(UPSERT_VECTOR, (job.chunk_rowid, blob, model_id, job.job_id, token))
                db.execute(MARK_DONE, (now, job.job_id, token))
                done += db.changes()
            changes.prune(db, ("chunks_vec_changes",), keep_changes)
        return done

    def fail(
        self, token: str, attempts: Sequence[FailedAttempt], error: str, now: str
    ) -> list[str]:
        db = self.db
        applied: list[str] = []
        with db.atomic():
            for a in attempts:
                db.execute(
                    MARK_FAILED_ATTEMPT,
                    (a.status, a.retry_count, a.next_retry_at, error, now, a.job_id, token),
                )
                if db.changes():
                    applied.append(a.status)
        return applied

    def release(self, token: str, job_ids: Sequence[int], now: str) -> None:
        with self.db.atomic():
            self.db.executemany(RELEASE, [(now, j, token) for j in job_ids])

    def enqueue(self, rowids: Sequence[int], now: str) -> int:
        self.db.executemany(ENQUEUE, [(int(r), now) for r in rowids])
        return len(rowids)

    def retry_failed(self, now: str) -> int:
        with self.db.atomic():
            self.db.execute(RETRY_FAILED, (now,))
            return self.db.changes()

    def prune_done(self, before: str) -> int:
        with self.db.atomic():
            self.db.execute(PRUNE_DONE, (before,))
            return self.db.changes()

    def counts(self, now: str) -> QueueCounts:
        db = self.db
        by_status = {str(s): int(n) for s, n in db.query(COUNT_BY_STATUS)}
        due = int(db.scalar(COUNT_DUE, (now,)))
        oldest, next_retry = db.scalar(OLDEST_WAITING), db.scalar(NEXT_RETRY, (now,))
        return QueueCounts(
            by_status=by_status,
            due=due,
            oldest_waiting_at=None if oldest is None else str(oldest),
            next_retry_at=None if next_retry is None else str(next_retry),
        )

    def list_jobs(self, status: str | None, limit: int) -> list[JobRow]:
        return [
            JobRow(
                job_id=int(r[0]),
                chunk_rowid=int(r[1]),
                chunk_id=str(r[2]),
                session_id=str(r[3]),
                status=str(r[4]),
                retry_count=int(r[5]),
                next_retry_at=str(r[6]),
                last_error=r[7],
                claimed_by=r[8],
                claim_expires_at=r[9],
                created_at=str(r[10]),
                updated_at=str(r[11]),
            )
            for r in self.db.query(LIST_JOBS, (status, limit))
        ]
