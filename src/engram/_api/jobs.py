"""Background indexing: jobs, worker, reconciler (docs/background-indexing.md)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from engram._api._facet import Facet
from engram.errors import InvalidInputError

if TYPE_CHECKING:
    from engram.jobs import (
        Clock,
        JobInfo,
        JobPolicy,
        JobQueueStatus,
        JobReport,
        ReconcileReport,
    )


__all__ = ["JobsAPI"]


class JobsAPI(Facet):
    """Background indexing: jobs, worker, reconciler on :class:`engram.Engram`."""

    def run_jobs(
        self,
        *,
        max_jobs: int | None = None,
        batch_size: int = 64,
        policy: JobPolicy | None = None,
        clock: Clock | None = None,
    ) -> JobReport:
        """Embed and index the chunks whose jobs are due now (one synchronous pass)."""
        from engram.jobs import run_jobs

        return run_jobs(
            self._engram, max_jobs=max_jobs, batch_size=batch_size, policy=policy, clock=clock
        )

    def job_status(self, *, clock: Clock | None = None) -> JobQueueStatus:
        """Job counts by status, how many are due, the oldest waiting job."""
        from engram.jobs import queue_status

        return (
            queue_status(self._engram.db) if clock is None else queue_status(self._engram.db, clock)
        )

    def list_jobs(self, *, status: str | None = None, limit: int = 50) -> list[JobInfo]:
        """Jobs in id order (``status``: pending, running, done or failed)."""
        from engram.jobs import list_jobs

        return list_jobs(self._engram.db, status, limit)

    def retry_failed_jobs(self) -> int:
        """Re-queue every dead-lettered job with its retries reset; returns how many."""
        from engram.jobs import queue

        return queue.retry_failed(self._engram.db, queue.utc_clock())

    def prune_jobs(self, *, older_than_seconds: float = 86_400.0) -> int:
        """Delete ``done`` jobs finished more than ``older_than_seconds`` ago."""

        from engram.jobs import queue

        if isinstance(older_than_seconds, bool) or not isinstance(older_than_seconds, int | float):
            raise InvalidInputError("older_than_seconds must be a number")
        before = queue.utc_clock() - timedelta(seconds=max(0.0, float(older_than_seconds)))
        return queue.prune_done(self._engram.db, before)

    def reconcile(self, *, repair: bool = True) -> ReconcileReport:
        """Find chunk/vector/index mismatches and, with ``repair``, fix them."""
        from engram.jobs import reconcile

        return reconcile(self._engram, repair=repair)
