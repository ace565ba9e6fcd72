"""The durable job queue: claim with a lease, complete, fail with backoff, inspect.

The rules live here (lease length, retries and backoff, which worker is dead, error
length); the rows change through the job store (:mod:`mindfile.storage.jobs`), whose
methods run in short transactions of their own (``BEGIN IMMEDIATE``), so a claim is
atomic between threads and processes: two workers never hold the same job. Embedding
happens between :func:`claim` and :func:`complete` / :func:`fail`, outside any
transaction. Functions take the job store (``engine.stores.jobs``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, cast

from mindfile.embed.base import Vectors, to_blob
from mindfile.errors import InvalidInputError
from mindfile.jobs.owner import default_worker_id, owner_gone
from mindfile.jobs.types import Clock, JobInfo, JobPolicy, JobQueueStatus, JobStatus
from mindfile.storage.db import Database
from mindfile.storage.jobs import CHANGE_LOG_KEEP, ClaimedJob, FailedAttempt, SqliteJobStore

if TYPE_CHECKING:
    from mindfile.storage.jobs import JobStore

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
class Claim:
    """Jobs leased under one token; ``recovered`` counts expired leases requeued first."""

    token: str
    jobs: tuple[ClaimedJob, ...]
    recovered: int = 0
    recovered_dead: int = 0


def claim(
    jobs: JobStore,
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
    expires = iso(now + timedelta(seconds=policy.lease_seconds))
    leased, statuses = jobs.claim(
        token,
        worker,
        now=iso(now),
        expires=expires,
        limit=limit,
        max_retries=policy.max_retries,
        gone=owner_gone,
    )
    return Claim(token, tuple(leased), len(statuses), statuses.count("failed"))


def recover_abandoned(jobs: JobStore, now: datetime, policy: JobPolicy) -> list[str]:
    """Put back the running jobs whose worker is dead; returns their new statuses.

    A job is abandoned when its lease expired, or when its holder is a process of this
    host that no longer exists (:func:`mindfile.jobs.owner.owner_gone`: a ``kill -9``ed
    worker is noticed at once, not ``lease_seconds`` later). The lost attempt counts as
    a failure: a job out of retries goes to the dead letter (``failed``).
    """
    return jobs.recover_abandoned(iso(now), policy.max_retries, owner_gone)


def count_abandoned(jobs: JobStore, now: datetime) -> int:
    """Running jobs whose worker is dead (see :func:`recover_abandoned`), read-only."""
    stamp = iso(now)
    return sum(
        1
        for owner, expires in jobs.running_leases()
        if expires is None or expires <= stamp or owner_gone(owner)
    )


def complete(
    jobs: JobStore, batch: Claim, vectors: Vectors, model_id: str, now: datetime
) -> tuple[int, int]:
    """Write the batch's vectors and mark its jobs done, in one transaction.

    Returns ``(succeeded, discarded)``: a job that vanished (its chunk was forgotten) or
    whose lease went to another worker meanwhile is discarded, its vector not written.
    """
    blobs = [to_blob(v) for v in vectors]
    if len(blobs) != len(batch.jobs):
        raise ValueError(f"{len(blobs)} vectors for {len(batch.jobs)} jobs")
    done = jobs.complete(
        batch.token, batch.jobs, blobs, model_id, iso(now), keep_changes=CHANGE_LOG_KEEP
    )
    return done, len(batch.jobs) - done


def fail(
    jobs: JobStore,
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
    attempts = []
    for job in batch.jobs:
        count = job.retry_count + 1
        status = "failed" if count > policy.max_retries else "pending"
        due = now if status == "failed" else now + timedelta(seconds=policy.backoff(count, random))
        attempts.append(FailedAttempt(job.job_id, status, count, iso(due)))
    applied = jobs.fail(batch.token, attempts, error[:MAX_ERROR_CHARS], iso(now))
    dead = applied.count("failed")
    retried = len(applied) - dead
    return retried, dead, len(batch.jobs) - retried - dead


def release(jobs: JobStore, batch: Claim, now: datetime) -> None:
    """Hand the batch back untouched (the worker was interrupted, not the embedder)."""
    jobs.release(batch.token, [j.job_id for j in batch.jobs], iso(now))


def enqueue(jobs: JobStore, rowids: Sequence[int], now: datetime) -> int:
    """Queue (or re-queue, resetting retries) a job for each chunk rowid."""
    return jobs.enqueue(rowids, iso(now))


def retry_failed(jobs: JobStore, now: datetime) -> int:
    """Move every dead-lettered job back to pending with its retries reset."""
    return jobs.retry_failed(iso(now))


def prune_done(jobs: JobStore, before: datetime) -> int:
    """Delete ``done`` jobs last updated before ``before``; returns how many."""
    return jobs.prune_done(iso(before))


def _job_store(jobs: JobStore | Database) -> JobStore:
    # The two functions exported by mindfile.jobs took the database before the storage
    # seam; a Database still works (it is the SQLite backend's).
    return SqliteJobStore(jobs) if isinstance(jobs, Database) else jobs


def queue_status(jobs: JobStore | Database, clock: Clock = utc_clock) -> JobQueueStatus:
    """Counts by status, due jobs, the oldest waiting job and the next retry."""
    counts = _job_store(jobs).counts(iso(clock()))
    by_status = counts.by_status
    return JobQueueStatus(
        pending=by_status.get("pending", 0),
        running=by_status.get("running", 0),
        done=by_status.get("done", 0),
        failed=by_status.get("failed", 0),
        due=counts.due,
        oldest_pending_at=counts.oldest_waiting_at,
        next_retry_at=counts.next_retry_at,
    )


def list_jobs(
    jobs: JobStore | Database, status: str | None = None, limit: int = 50
) -> list[JobInfo]:
    """Jobs in id order, optionally only those with ``status``."""
    if status is not None and status not in JOB_STATUSES:
        raise InvalidInputError(f"status must be one of {JOB_STATUSES}, not {status!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInputError("limit must be a positive integer")
    return [
        JobInfo(
            job_id=r.job_id,
            chunk_rowid=r.chunk_rowid,
            chunk_id=r.chunk_id,
            session_id=r.session_id,
            status=cast(JobStatus, r.status),
            retry_count=r.retry_count,
            next_retry_at=r.next_retry_at,
            last_error=r.last_error,
            claimed_by=r.claimed_by,
            claim_expires_at=r.claim_expires_at,
            created_at=r.created_at,
            updated_at=r.updated_at,
        )
        for r in _job_store(jobs).list_jobs(status, limit)
    ]
