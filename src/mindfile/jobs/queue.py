"""The durable job queue: claim with a lease, complete, fail with backoff, inspect.

Functions take a :class:`~mindfile.storage.db.Database` and open their own short
transactions (``BEGIN IMMEDIATE``), so a claim is atomic between threads and processes:
two workers never hold the same job. Embedding happens between :func:`claim` and
:func:`complete` / :func:`fail`, outside any transaction.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

from mindfile.embed.base import Vectors, to_blob
from mindfile.errors import InvalidInputError
from mindfile.jobs import _sql
from mindfile.jobs.owner import default_worker_id, owner_gone
from mindfile.jobs.types import Clock, JobInfo, JobPolicy, JobQueueStatus, JobStatus
from mindfile.storage import changes
from mindfile.storage.db import Database

__all__ = [
    "CHANGE_LOG_KEEP",
    "Claim",
    "ClaimedJob",
    "claim",
    "complete",
    "count_abandoned",
    "default_worker_id",
    "enqueue",
    "fail",
    "iso",
    "list_jobs",
    "prune_done",
    "queue_status",
    "recover_abandoned",
    "release",
    "retry_failed",
    "utc_clock",
]

#: Rows of ``chunks_vec_changes`` kept after each completed batch.
CHANGE_LOG_KEEP = changes.KEEP

#: ``last_error`` is cut to this many characters (provider errors can be whole pages).
MAX_ERROR_CHARS = 2000

JOB_STATUSES: tuple[JobStatus, ...] = ("pending", "running", "done", "failed")


def utc_clock() -> datetime:
    """The real clock."""
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """ISO-8601 UTC text with microseconds, like every Mindfile timestamp (naive = UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """A leased job and the text to embed."""

    job_id: int
    chunk_rowid: int
    retry_count: int
    text: str


@dataclass(frozen=True, slots=True)
class Claim:
    """Jobs leased under one token; ``recovered`` counts expired leases requeued first."""

    token: str
    jobs: tuple[ClaimedJob, ...]
    recovered: int = 0
    recovered_dead: int = 0


def claim(
    db: Database,
    *,
    now: datetime,
    limit: int,
    worker: str,
    policy: JobPolicy,
) -> Claim:
    """Lease due jobs: up to ``limit`` first attempts, or one retried job alone.

    Jobs of dead workers (expired leases, or holders that are gone) are recovered
    first, in the same transaction.
    """
    token = uuid.uuid4().hex
    stamp = iso(now)
    expires = iso(now + timedelta(seconds=policy.lease_seconds))
    with db.atomic():
        statuses = recover_abandoned(db, now, policy)
        first = db.query_one(_sql.FIRST_DUE, (stamp,))
        rows: list[tuple[int, int, int]] = []
        if first is not None:
            lease = {"token": token, "worker": worker, "expires": expires, "now": stamp}
            if int(first[1]) > 0:
                found = db.query(_sql.CLAIM_ONE, {**lease, "job_id": int(first[0])})
            else:
                found = db.query(_sql.CLAIM_FRESH, {**lease, "limit": limit})
            rows = sorted((int(a), int(b), int(c)) for a, b, c in found)
        texts: dict[int, str] = {}
        if rows:
            ids = json.dumps([r[1] for r in rows])
            texts = {int(i): str(t) for i, t in db.query(_sql.CHUNK_TEXTS, (ids,))}
    jobs = tuple(ClaimedJob(j, c, n, texts[c]) for j, c, n in rows if c in texts)
    return Claim(token, jobs, len(statuses), statuses.count("failed"))


def recover_abandoned(db: Database, now: datetime, policy: JobPolicy) -> list[str]:
    """Put back the running jobs whose worker is dead; returns their new statuses.

    A job is abandoned when its lease expired, or when its holder is a process of this
    host that no longer exists (:func:`mindfile.jobs.owner.owner_gone`: a ``kill -9``ed
    worker is noticed at once, not ``lease_seconds`` later). The lost attempt counts as
    a failure: a job out of retries goes to the dead letter (``failed``).
    """
    stamp = iso(now)
    args = {"now": stamp, "max_retries": policy.max_retries}
    with db.atomic():
        statuses = [str(r[0]) for r in db.query(_sql.RECOVER_EXPIRED, args)]
        owners = [str(r[0]) for r in db.query(_sql.RUNNING_OWNERS, (stamp,))]
        gone = [o for o in owners if owner_gone(o)]
        if gone:
            found = db.query(_sql.RECOVER_ORPHANED, {**args, "owners": json.dumps(gone)})
            statuses.extend(str(r[0]) for r in found)
    return statuses


def count_abandoned(db: Database, now: datetime) -> int:
    """Running jobs whose worker is dead (see :func:`recover_abandoned`), read-only."""
    stamp = iso(now)
    return sum(
        1
        for owner, expires in db.query(_sql.RUNNING_LEASES)
        if expires is None or str(expires) <= stamp or owner_gone(owner)
    )


def complete(
    db: Database, batch: Claim, vectors: Vectors, model_id: str, now: datetime
) -> tuple[int, int]:
    """Write the batch's vectors and mark its jobs done, in one transaction.

    Returns ``(succeeded, discarded)``: a job that vanished (its chunk was forgotten) or
    whose lease went to another worker meanwhile is discarded, its vector not written.
    """
    stamp = iso(now)
    done = 0
    with db.atomic():
        for job, vector in zip(batch.jobs, vectors, strict=True):
            db.execute(
                _sql.UPSERT_VECTOR,
                (job.chunk_rowid, to_blob(vector), model_id, job.job_id, batch.token),
            )
            db.execute(_sql.MARK_DONE, (stamp, job.job_id, batch.token))
            done += db.changes()
        changes.prune(db, ("chunks_vec_changes",), CHANGE_LOG_KEEP)
    return done, len(batch.jobs) - done


def fail(
    db: Database,
    batch: Claim,
    error: str,
    now: datetime,
    policy: JobPolicy,
    random: float = 0.0,
) -> tuple[int, int, int]:
    """Record a failed attempt for every job of the batch.

    Each job is rescheduled ``policy.backoff(retry_count)`` seconds from ``now``, or
    dead-lettered (``failed``) once it has failed ``1 + max_retries`` times. Returns
    ``(retried, dead_lettered, discarded)``.
    """
    stamp = iso(now)
    message = error[:MAX_ERROR_CHARS]
    retried = dead = 0
    with db.atomic():
        for job in batch.jobs:
            count = job.retry_count + 1
            status = "failed" if count > policy.max_retries else "pending"
            due = (
                now
                if status == "failed"
                else now + timedelta(seconds=policy.backoff(count, random))
            )
            db.execute(
                _sql.MARK_FAILED_ATTEMPT,
                (status, count, iso(due), message, stamp, job.job_id, batch.token),
            )
            if db.changes():
                if status == "failed":
                    dead += 1
                else:
                    retried += 1
    return retried, dead, len(batch.jobs) - retried - dead


def release(db: Database, batch: Claim, now: datetime) -> None:
    """Hand the batch back untouched (the worker was interrupted, not the embedder)."""
    with db.atomic():
        db.executemany(_sql.RELEASE, [(iso(now), j.job_id, batch.token) for j in batch.jobs])


def enqueue(db: Database, rowids: Sequence[int], now: datetime) -> int:
    """Queue (or re-queue, resetting retries) a job for each chunk rowid."""
    stamp = iso(now)
    db.executemany(_sql.ENQUEUE, [(int(r), stamp) for r in rowids])
    return len(rowids)


def retry_failed(db: Database, now: datetime) -> int:
    """Move every dead-lettered job back to pending with its retries reset."""
    with db.atomic():
        db.execute(_sql.RETRY_FAILED, (iso(now),))
        return db.changes()


def prune_done(db: Database, before: datetime) -> int:
    """Delete ``done`` jobs last updated before ``before``; returns how many."""
    with db.atomic():
        db.execute(_sql.PRUNE_DONE, (iso(before),))
        return db.changes()


def queue_status(db: Database, clock: Clock = utc_clock) -> JobQueueStatus:
    """Counts by status, due jobs, the oldest waiting job and the next retry."""
    stamp = iso(clock())
    counts = {str(s): int(n) for s, n in db.query(_sql.COUNT_BY_STATUS)}
    return JobQueueStatus(
        pending=counts.get("pending", 0),
        running=counts.get("running", 0),
        done=counts.get("done", 0),
        failed=counts.get("failed", 0),
        due=int(db.scalar(_sql.COUNT_DUE, (stamp,))),
        oldest_pending_at=db.scalar(_sql.OLDEST_WAITING),
        next_retry_at=db.scalar(_sql.NEXT_RETRY, (stamp,)),
    )


def list_jobs(db: Database, status: str | None = None, limit: int = 50) -> list[JobInfo]:
    """Jobs in id order, optionally only those with ``status``."""
    if status is not None and status not in JOB_STATUSES:
        raise InvalidInputError(f"status must be one of {JOB_STATUSES}, not {status!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInputError("limit must be a positive integer")
    return [
        JobInfo(
            job_id=int(r[0]),
            chunk_rowid=int(r[1]),
            chunk_id=str(r[2]),
            session_id=str(r[3]),
            status=cast(JobStatus, r[4]),
            retry_count=int(r[5]),
            next_retry_at=str(r[6]),
            last_error=r[7],
            claimed_by=r[8],
            claim_expires_at=r[9],
            created_at=str(r[10]),
            updated_at=str(r[11]),
        )
        for r in db.query(_sql.LIST_JOBS, (status, limit))
    ]
