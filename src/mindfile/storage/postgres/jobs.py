"""The Postgres :class:`~mindfile.storage.jobs.JobStore`: the embedding-job queue.

The rules are :mod:`mindfile.jobs.queue`'s and the contract SQLite's
(:mod:`mindfile.storage.jobs`). SQLite's write lock makes a claim atomic; here workers in
several processes on several hosts claim at once, so the due rows are locked with
``FOR UPDATE SKIP LOCKED``: a worker never waits for another's claim and never leases a
job another holds. Every write of a leased job is conditional on its claim token, so a
worker whose lease was recovered changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mindfile.storage.jobs import (
    CHANGE_LOG_KEEP,
    ClaimedJob,
    FailedAttempt,
    JobRow,
    QueueCounts,
)
from mindfile.storage.postgres.db import PgDatabase
from mindfile.storage.postgres.sessions import prune_changes
from mindfile.storage.postgres.writer_lock import lock_chunk_writes

__all__ = ["PgJobStore"]

_RECOVERED = """
    retry_count = retry_count + 1,
    status = CASE WHEN retry_count + 1 > %(max_retries)s THEN 'failed' ELSE 'pending' END,
    next_retry_at = %(now)s,
    claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL,
    updated_at = %(now)s
"""

RECOVER_EXPIRED = f"""
UPDATE memory_jobs SET {_RECOVERED},
    last_error = 'lease expired: worker ' || coalesce(claimed_by, '?')
                 || ' stopped before finishing'
WHERE status = 'running' AND claim_expires_at <= %(now)s
RETURNING status
"""

RUNNING_OWNERS = """
SELECT DISTINCT claimed_by FROM memory_jobs
WHERE status = 'running' AND claim_expires_at > %s AND claimed_by IS NOT NULL
"""

RECOVER_ORPHANED = f"""
UPDATE memory_jobs SET {_RECOVERED},
    last_error = 'worker ' || claimed_by || ' is gone (killed before finishing)'
WHERE status = 'running' AND claimed_by = ANY(%(owners)s::text[])
RETURNING status
"""

RUNNING_LEASES = "SELECT claimed_by, claim_expires_at FROM memory_jobs WHERE status = 'running'"

# The first due job, locked for this transaction; one another worker is claiming is
# skipped, not waited for.
FIRST_DUE = """
SELECT job_id, retry_count FROM memory_jobs
WHERE status = 'pending' AND next_retry_at <= %s
ORDER BY next_retry_at, job_id
LIMIT 1
FOR UPDATE SKIP LOCKED
"""

_LEASE = """
UPDATE memory_jobs AS j SET
    status = 'running', claim_token = %(token)s, claimed_by = %(worker)s,
    claim_expires_at = %(expires)s, updated_at = %(now)s
"""

# A retried job is claimed alone (one chunk the embedder rejects cannot fail a batch).
CLAIM_ONE = (
    _LEASE
    + """WHERE j.job_id = %(job_id)s AND j.status = 'pending'
RETURNING j.job_id, j.chunk_rowid, j.retry_count
"""
)

CLAIM_FRESH = (
    """
WITH due AS (
    SELECT job_id FROM memory_jobs
    WHERE status = 'pending' AND retry_count = 0 AND next_retry_at <= %(now)s
    ORDER BY next_retry_at, job_id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)"""
    + _LEASE
    + """FROM due WHERE j.job_id = due.job_id
RETURNING j.job_id, j.chunk_rowid, j.retry_count
"""
)

CHUNK_TEXTS = "SELECT id, chunk_text FROM chunks WHERE id = ANY(%s::bigint[])"

# Written only while the job is still ours; a vector is rewritten only when another
# model made it (a repair), so a replayed job is a no-op.
UPSERT_VECTOR = """
INSERT INTO chunks_vec (chunk_rowid, embedding, embedding_model)
SELECT %(rowid)s::bigint, %(vector)s::vector, %(model)s::text WHERE EXISTS (
    SELECT 1 FROM memory_jobs
    WHERE job_id = %(job)s AND claim_token = %(token)s AND status = 'running'
)
ON CONFLICT (chunk_rowid) DO UPDATE SET
    embedding = EXCLUDED.embedding, embedding_model = EXCLUDED.embedding_model
WHERE chunks_vec.embedding_model <> EXCLUDED.embedding_model
"""

MARK_DONE = """
UPDATE memory_jobs SET
    status = 'done', claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL,
    updated_at = %s
WHERE job_id = %s AND claim_token = %s AND status = 'running'
"""

MARK_FAILED_ATTEMPT = """
UPDATE memory_jobs SET
    status = %s, retry_count = %s, next_retry_at = %s, last_error = %s,
    claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL, updated_at = %s
WHERE job_id = %s AND claim_token = %s AND status = 'running'
"""

RELEASE = """
UPDATE memory_jobs SET
    status = 'pending', claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL,
    updated_at = %s
WHERE job_id = %s AND claim_token = %s AND status = 'running'
"""

ENQUEUE = """
INSERT INTO memory_jobs (chunk_rowid, status, next_retry_at, created_at, updated_at)
VALUES (%(rowid)s, 'pending', %(now)s, %(now)s, %(now)s)
ON CONFLICT (chunk_rowid) DO UPDATE SET
    status = 'pending', retry_count = 0, next_retry_at = %(now)s, last_error = NULL,
    claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL, updated_at = %(now)s
"""

RETRY_FAILED = """
UPDATE memory_jobs SET status = 'pending', retry_count = 0, next_retry_at = %s, updated_at = %s
WHERE status = 'failed'
"""

PRUNE_DONE = "DELETE FROM memory_jobs WHERE status = 'done' AND updated_at < %s"

COUNT_BY_STATUS = "SELECT status, count(*) FROM memory_jobs GROUP BY status"

COUNT_DUE = """
SELECT
    (SELECT count(*) FROM memory_jobs WHERE status = 'pending' AND next_retry_at <= %(now)s)
  + (SELECT count(*) FROM memory_jobs WHERE status = 'running' AND claim_expires_at <= %(now)s)
"""

OLDEST_WAITING = "SELECT min(created_at) FROM memory_jobs WHERE status IN ('pending', 'running')"

NEXT_RETRY = """
SELECT min(next_retry_at) FROM memory_jobs WHERE status = 'pending' AND next_retry_at > %s
"""

LIST_JOBS = """
SELECT j.job_id, j.chunk_rowid, c.chunk_id, c.session_id, j.status, j.retry_count,
       j.next_retry_at, j.last_error, j.claimed_by, j.claim_expires_at, j.created_at,
       j.updated_at
FROM memory_jobs AS j JOIN chunks AS c ON c.id = j.chunk_rowid
WHERE (%(status)s::text IS NULL OR j.status = %(status)s)
ORDER BY j.job_id
LIMIT %(limit)s
"""


class PgJobStore:
    """:class:`~mindfile.storage.jobs.JobStore` on ``memory_jobs`` (and ``chunks_vec``)."""

    def __init__(self, db: PgDatabase) -> None:
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
                found = db.query(RECOVER_ORPHANED, {**args, "owners": dead})
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
                found_texts = db.query(CHUNK_TEXTS, ([r[1] for r in rows],))
                texts = {int(i): str(t) for i, t in found_texts}
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
            lock_chunk_writes(db)
            for job, blob in zip(jobs, blobs, strict=True):
                vector = np.frombuffer(blob, dtype="<f4").astype(np.float32)
                db.execute(
                    UPSERT_VECTOR,
                    {
                        "rowid": job.chunk_rowid, "vector": vector, "model": model_id,
                        "job": job.job_id, "token": token,
                    },
                )  # fmt: skip
                db.execute(MARK_DONE, (now, job.job_id, token))
                done += db.changes()
            prune_changes(db, ("chunks_vec_changes",), keep_changes)
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
        with self.db.atomic():
            for rowid in rowids:
                self.db.execute(ENQUEUE, {"rowid": int(rowid), "now": now})
        return len(rowids)

    def retry_failed(self, now: str) -> int:
        self.db.execute(RETRY_FAILED, (now, now))
        return self.db.changes()

    def prune_done(self, before: str) -> int:
        self.db.execute(PRUNE_DONE, (before,))
        return self.db.changes()

    def counts(self, now: str) -> QueueCounts:
        db = self.db
        with db.snapshot():
            by_status = {str(s): int(n) for s, n in db.query(COUNT_BY_STATUS)}
            due = int(db.scalar(COUNT_DUE, {"now": now}))
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
            for r in self.db.query(LIST_JOBS, {"status": status, "limit": limit})
        ]
