"""Value types of background indexing: the retry policy, reports, job and queue views."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from mindfile.errors import ConfigError

__all__ = [
    "Clock",
    "JobInfo",
    "JobPolicy",
    "JobQueueStatus",
    "JobReport",
    "JobStatus",
    "ReconcileReport",
]

JobStatus = Literal["pending", "running", "done", "failed"]

#: Returns the current time as an aware datetime (UTC); injectable for tests.
Clock = Callable[[], datetime]


class _ToDict:
    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the fields."""
        return asdict(self)  # type: ignore[call-overload,no-any-return]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobPolicy(_ToDict):
    """How a worker retries, leases and gives up.

    A job is tried at most ``1 + max_retries`` times; after that it is ``failed`` (the
    dead letter). Before retry ``n`` (1-based) it waits
    ``min(backoff_cap, backoff_base * 2 ** (n - 1))`` seconds, shortened by up to
    ``jitter`` (a fraction; 0 = deterministic). A claim is a lease of ``lease_seconds``:
    a worker that dies holding it loses the job to the next worker once it expires (the
    lost attempt counts as a failure, so a chunk that kills its worker cannot loop
    forever). A pass stops early after ``stop_after_failures`` failed batches in a row
    (the embedder is probably down; the jobs are already rescheduled).
    """

    max_retries: int = 5
    backoff_base: float = 1.0
    backoff_cap: float = 300.0
    jitter: float = 0.0
    lease_seconds: float = 120.0
    stop_after_failures: int = 3

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int):
            raise ConfigError("max_retries must be an integer")
        if self.max_retries < 0:
            raise ConfigError("max_retries must not be negative")
        for name in ("backoff_base", "backoff_cap", "lease_seconds"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be a finite number >= 0")
        if self.lease_seconds <= 0:
            raise ConfigError("lease_seconds must be positive")
        if not isinstance(self.jitter, int | float) or not 0 <= self.jitter <= 1:
            raise ConfigError("jitter must be a fraction from 0 to 1")
        if isinstance(self.stop_after_failures, bool) or not isinstance(
            self.stop_after_failures, int
        ):
            raise ConfigError("stop_after_failures must be an integer")
        if self.stop_after_failures < 1:
            raise ConfigError("stop_after_failures must be at least 1")

    def backoff(self, retry: int, random: float = 0.0) -> float:
        """Seconds to wait before retry number ``retry`` (1-based).

        ``random`` in [0, 1) scales the jitter: the delay is shortened by
        ``jitter * random`` of itself ("equal jitter" style, never longer than the cap).
        """
        exponent = min(max(retry - 1, 0), 62)  # 2**62 s is already far past any cap
        delay = min(self.backoff_cap, self.backoff_base * 2.0**exponent)
        return delay * (1.0 - self.jitter * random)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobReport(_ToDict):
    """What one :func:`~mindfile.jobs.run_jobs` pass did.

    ``claimed`` jobs ended as ``succeeded`` (vector written, job done), ``retried``
    (rescheduled with backoff), ``dead_lettered`` (``failed`` for good) or
    ``discarded`` (the chunk was forgotten, or the lease was lost to another worker,
    while embedding). ``recovered`` counts expired leases of dead workers put back in
    the queue before claiming. ``stopped_early`` is set when the pass gave up after
    ``stop_after_failures`` failed batches in a row; ``last_error`` is the last failure.
    """

    claimed: int = 0
    succeeded: int = 0
    retried: int = 0
    dead_lettered: int = 0
    discarded: int = 0
    recovered: int = 0
    batches: int = 0
    stopped_early: bool = False
    last_error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobInfo(_ToDict):
    """One job, as listed by :meth:`mindfile.Mindfile.list_jobs`."""

    job_id: int
    chunk_rowid: int
    chunk_id: str
    session_id: str
    status: JobStatus
    retry_count: int
    next_retry_at: str
    last_error: str | None
    claimed_by: str | None
    claim_expires_at: str | None
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True, kw_only=True)
class JobQueueStatus(_ToDict):
    """Counts by status, what is due now, and the oldest waiting job.

    ``due`` counts pending jobs whose ``next_retry_at`` has passed plus running jobs
    whose lease expired; ``oldest_pending_at`` is the ``created_at`` of the oldest
    pending or running job (how far behind indexing is), ``next_retry_at`` the earliest
    scheduled retry still in the future.
    """

    pending: int
    running: int
    done: int
    failed: int
    due: int
    oldest_pending_at: str | None
    next_retry_at: str | None

    @property
    def backlog(self) -> int:
        """Chunks whose vector is not written yet (pending, running or dead-lettered)."""
        return self.pending + self.running + self.failed

    def to_dict(self) -> dict[str, Any]:
        """The fields plus ``backlog``."""
        return {**asdict(self), "backlog": self.backlog}


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconcileReport(_ToDict):
    """What :meth:`mindfile.Mindfile.reconcile` found and (with ``repair``) fixed.

    * ``missing_vectors``: chunks with no vector and no live (pending/running) job.
    * ``dead_lettered``: chunks with no vector whose job is ``failed`` (reported, not
      re-queued: use :meth:`~mindfile.Mindfile.retry_failed_jobs`).
    * ``wrong_model_vectors``: vectors made by another model than the store's, or whose
      blob is not ``dimensions`` float32 values; repair deletes and re-queues them.
    * ``orphan_vectors``: vectors whose chunk is gone (only possible with foreign keys
      off); repair deletes them.
    * ``fts_rows`` / ``chunks``: the FTS index disagreeing with the chunks table;
      repair rebuilds it (``fts_rebuilt``).
    * ``index_size`` / ``vector_count``: the derived vector index after catching up vs
      ``chunks_vec``; repair rebuilds it on a mismatch (``index_rebuilt``).
    * ``lexical_size``: documents in the in-memory BM25 index after catching up (None
      when the store ranks with FTS5); repair rebuilds it when it differs from
      ``chunks`` (``lexical_rebuilt``).
    * ``damaged_text``: stored text cells that are not valid UTF-8, as
      ``table.column#rowid`` (:mod:`mindfile.storage.damaged`): found now, or already
      repaired by a read of this process since the last reconcile (reads rewrite them
      decoded with replacement characters, and so does repair).
    * ``abandoned_jobs``: jobs left ``running`` by a dead worker (lease expired, or a
      process of this host that no longer exists); repair puts them back in the queue
      at once (the lost attempt counts as a failure, as for an expired lease).
    * ``enqueued``: jobs created or reset by the repair; ``embedded``: how many were
      embedded right away (sync-indexing stores drain the queue; background stores
      leave it to the worker).
    """

    repaired: bool
    chunks: int
    missing_vectors: int
    dead_lettered: int
    wrong_model_vectors: int
    orphan_vectors: int
    fts_rows: int
    vector_count: int
    index_size: int
    enqueued: int = 0
    embedded: int = 0
    fts_rebuilt: bool = False
    index_rebuilt: bool = False
    lexical_size: int | None = None
    lexical_rebuilt: bool = False
    damaged_text: list[str] = field(default_factory=list)
    abandoned_jobs: int = 0

    @property
    def consistent(self) -> bool:
        """True when nothing was found wrong (before any repair)."""
        return (
            self.missing_vectors == 0
            and self.wrong_model_vectors == 0
            and self.orphan_vectors == 0
            and self.fts_rows == self.chunks
            and self.index_size == self.vector_count
            and self.lexical_size in (None, self.chunks)
            and not self.damaged_text
            and self.abandoned_jobs == 0
        )

    def to_dict(self) -> dict[str, Any]:
        """The fields plus ``consistent``."""
        return {**asdict(self), "consistent": self.consistent}
