"""The :class:`SchedulerStore` seam: what a runner, the tools and the CLI need from storage.

The seed's methods plus three for the runner's lease (``claim_due``, ``renew_claim``,
``release_claim``). Every method addressing a schedule or run by id raises
:class:`~mindfile.errors.NotFoundError` when it does not exist.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from mindfile.scheduler._time import TimeLike
from mindfile.scheduler.types import (
    ScheduleClaim,
    ScheduleDefinition,
    SchedulePatch,
    ScheduleRunRecord,
    ScheduleSearchFilters,
    ScheduleSearchResult,
    ScheduleStatus,
)

__all__ = ["SchedulerStore"]


@runtime_checkable
class SchedulerStore(Protocol):
    """Durable schedules and their run history."""

    def create(
        self, definition: ScheduleDefinition, *, now: TimeLike | None = None
    ) -> ScheduleDefinition:
        """Validate and insert a schedule; returns it with ``next_run_at`` filled in."""
        ...

    def get(self, schedule_id: str) -> ScheduleDefinition:
        """One schedule by id."""
        ...

    def search(self, user_id: str, filters: ScheduleSearchFilters) -> ScheduleSearchResult:
        """One page of a user's schedules plus the total matching."""
        ...

    def count(self, user_id: str, *, status: ScheduleStatus | None = None) -> int:
        """How many schedules a user has (optionally in one status)."""
        ...

    def delete(self, schedule_id: str) -> ScheduleDefinition:
        """Delete a schedule and its run history; returns what was deleted."""
        ...

    def update(
        self, schedule_id: str, patch: SchedulePatch, *, now: TimeLike | None = None
    ) -> ScheduleDefinition:
        """Apply a patch (re-planning ``next_run_at`` when cadence or status change)."""
        ...

    def due_schedules(self, now: TimeLike, limit: int) -> list[ScheduleDefinition]:
        """Active schedules whose ``next_run_at <= now``, soonest first (claims ignored)."""
        ...

    def claim_due(
        self, now: TimeLike, *, runner_id: str, lease_secs: float, limit: int = 1
    ) -> list[ScheduleClaim]:
        """Atomically lease up to ``limit`` due, unleased occurrences to ``runner_id``."""
        ...

    def renew_claim(
        self, schedule_id: str, token: str, *, now: TimeLike, lease_secs: float
    ) -> bool:
        """Extend a lease this token still holds; False if it was lost."""
        ...

    def release_claim(self, schedule_id: str, token: str) -> bool:
        """Give a lease back without recording a run; False if it was not held."""
        ...

    def record_run_and_reschedule(
        self,
        schedule_id: str,
        run: ScheduleRunRecord,
        next_run_at: TimeLike | None,
        new_status: ScheduleStatus | None = None,
        *,
        claim_token: str | None = None,
    ) -> None:
        """Insert a run and move the schedule on, in one transaction."""
        ...

    def prune_run_history(self, schedule_id: str, keep: int) -> int:
        """Delete all but the ``keep`` newest runs; returns how many were deleted."""
        ...

    def get_run_history(self, schedule_id: str, limit: int = 20) -> list[ScheduleRunRecord]:
        """The newest runs of a schedule, newest first."""
        ...

    def get_run_by_id(self, run_id: str) -> ScheduleRunRecord:
        """One run by id."""
        ...
