"""Background indexing: jobs, worker, reconciler (docs/background-indexing.md)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from mindfile._api._facet import Facet
from mindfile.errors import InvalidInputError

if TYPE_CHECKING:
    from mindfile.jobs import (
        Clock,
        JobInfo,
        JobPolicy,
        JobQueueStatus,
        JobReport,
        ReconcileReport,
    )


__all__ = ["JobsAPI"]


#: About 3,000 years: beyond what a timedelta can subtract from now.
MAX_AGE_SECONDS = 1e11


def _check_clock(clock: object) -> None:
    if clock is not None and not callable(clock):
        raise InvalidInputError("clock must be a callable returning an aware datetime, or None")


class JobsAPI(Facet):
    """Background indexing: jobs, worker, reconciler on :class:`mindfile.Mindfile`."""

    def run_jobs(
        self,
        *,
        max_jobs: int | None = None,
        batch_size: int = 64,
        policy: JobPolicy | None = None,
        clock: Clock | None = None,
    ) -> JobReport:
        """Embed and index the chunks whose jobs are due now (one synchronous pass)."""
        from mindfile.jobs import JobPolicy, run_jobs

        if policy is not None and not isinstance(policy, JobPolicy):
            raise InvalidInputError("policy must be a JobPolicy or None")
        _check_clock(clock)
        return run_jobs(
            self._mindfile, max_jobs=max_jobs, batch_size=batch_size, policy=policy, clock=clock
        )

    def job_status(self, *, clock: Clock | None = None) -> JobQueueStatus:
        """Job counts by status, how many are due, the oldest waiting job."""
        from mindfile.jobs import queue_status

        _check_clock(clock)
        return (
            queue_status(self._mindfile.stores.jobs)
            if clock is None
            else queue_status(self._mindfile.stores.jobs, clock)
        )

    def list_jobs(self, *, status: str | None = None, limit: int = 50) -> list[JobInfo]:
        """Jobs in id order (``status``: pending, running, done or failed)."""
        from mindfile.jobs import list_jobs

        return list_jobs(self._mindfile.stores.jobs, status, limit)

    def retry_failed_jobs(self) -> int:
        """Re-queue every dead-lettered job with its retries reset; returns how many."""
        from mindfile.jobs import queue

        return queue.retry_failed(self._mindfile.stores.jobs, queue.utc_clock())

    def prune_jobs(self, *, older_than_seconds: float = 86_400.0) -> int:
        """Delete ``done`` jobs finished more than ``older_than_seconds`` ago."""

        from mindfile.jobs import queue

        if (
            isinstance(older_than_seconds, bool)
            or not isinstance(older_than_seconds, int | float)
            or not 0 <= older_than_seconds <= MAX_AGE_SECONDS
        ):
            raise InvalidInputError(
                f"older_than_seconds must be a number from 0 to {MAX_AGE_SECONDS:.0e}"
            )
        before = queue.utc_clock() - timedelta(seconds=max(0.0, float(older_than_seconds)))
        return queue.prune_done(self._mindfile.stores.jobs, before)

    def reconcile(self, *, repair: bool = True) -> ReconcileReport:
        """Find chunk/vector/index mismatches and, with ``repair``, fix them."""
        from mindfile.jobs import reconcile

        return reconcile(self._mindfile, repair=repair)
