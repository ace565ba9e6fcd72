"""The runner: fire due schedules through a handler, record, reschedule.

One pass (:meth:`Runner.run_due`) repeatedly leases one due occurrence, calls the
handler, and records the run and the next firing in one transaction, until nothing is
due. Semantics:

* **Leases.** A claim is a conditional ``UPDATE`` under SQLite's write lock, so two
  runners (threads or processes, each with its own connection to the same file) never
  get the same occurrence. While the handler runs, a heartbeat renews the lease every
  ``lease_secs / 3``. If a runner dies mid-run its lease expires and another runner
  fires the occurrence again (at-least-once in that case only); the store still refuses
  a second record for one occurrence.
* **Missed runs.** After downtime a schedule fires once, and its next firing is the
  first one strictly after the time the run finished - no burst of catch-up runs.
* **Failures.** A handler exception, or a :class:`HandlerResult` with ``ok=False``, is a
  failed run. After ``max_consecutive_failures`` failures in a row the schedule is
  paused; a success resets the count.
* **One-shot** schedules become ``completed`` after their run, whatever the outcome.
* **Notification.** The schedule's policy (always / on_failure / never) sets the run's
  ``notified`` flag; an optional ``notifier`` is called after the record commits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mindfile.errors import ConfigError, ConflictError, MindfileError, NotFoundError
from mindfile.scheduler._time import iso_or_none, now_utc, to_utc
from mindfile.scheduler.cadence import reschedule
from mindfile.scheduler.protocol import SchedulerStore
from mindfile.scheduler.types import (
    RunStatus,
    ScheduleClaim,
    ScheduleDefinition,
    ScheduleRunRecord,
    ScheduleStatus,
)

__all__ = ["Handler", "HandlerResult", "Notifier", "RunOutcome", "Runner"]

log = logging.getLogger("mindfile.scheduler")


@dataclass(frozen=True, slots=True, kw_only=True)
class HandlerResult:
    """What a handler reports about one run (a plain ``str`` return means ``output``)."""

    output: str = ""
    ok: bool = True
    turn_count: int = 0
    cost: float = 0.0


#: ``handler(schedule)``: run the agent for ``schedule.goal``. ``schedule.next_run_at``
#: is the occurrence being fired. Return a :class:`HandlerResult`, a string (the output)
#: or ``None``; raising marks the run failed.
Handler = Callable[[ScheduleDefinition], HandlerResult | str | None]

#: ``notifier(schedule, run)``: deliver a notification for a recorded run.
Notifier = Callable[[ScheduleDefinition, ScheduleRunRecord], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOutcome:
    """What happened to one claimed occurrence."""

    schedule_id: str
    scheduled_for: str
    run: ScheduleRunRecord
    recorded: bool
    next_run_at: str | None
    new_status: ScheduleStatus | None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return {
            "schedule_id": self.schedule_id,
            "scheduled_for": self.scheduled_for,
            "run": self.run.to_dict(),
            "recorded": self.recorded,
            "next_run_at": self.next_run_at,
            "new_status": None if self.new_status is None else self.new_status.value,
            "error": self.error,
        }


class Runner:
    """Polls a scheduler store and fires due schedules through ``handler``.

    ``target`` is an engine (anything with a ``.schedules`` store, e.g.
    ``mindfile.open(...)``) or a :class:`SchedulerStore` itself. ``clock`` returns the
    current aware datetime (tests pass a fake one).
    """

    def __init__(
        self,
        target: Any,
        handler: Handler,
        *,
        runner_id: str | None = None,
        lease_secs: float = 300.0,
        max_consecutive_failures: int | None = 3,
        keep_runs: int | None = 100,
        notifier: Notifier | None = None,
        clock: Callable[[], datetime] | None = None,
        poll_interval_secs: float = 30.0,
    ) -> None:
        store = getattr(target, "schedules", target)
        if not isinstance(store, SchedulerStore):
            raise ConfigError("Runner needs a SchedulerStore or an object with .schedules")
        if lease_secs <= 0 or poll_interval_secs <= 0:
            raise ConfigError("lease_secs and poll_interval_secs must be positive")
        if max_consecutive_failures is not None and max_consecutive_failures < 1:
            raise ConfigError("max_consecutive_failures must be at least 1 (or None)")
        self.store: SchedulerStore = store
        self.handler = handler
        self.runner_id = runner_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_secs = lease_secs
        self.max_consecutive_failures = max_consecutive_failures
        self.keep_runs = keep_runs
        self.notifier = notifier
        self.poll_interval_secs = poll_interval_secs
        self._clock = clock or now_utc

    def now(self) -> datetime:
        """The runner's current time (aware UTC)."""
        return to_utc(self._clock(), what="clock()")

    def run_due(self, *, limit: int = 100) -> list[RunOutcome]:
        """Fire what is due now, one lease at a time, at most ``limit`` runs."""
        outcomes: list[RunOutcome] = []
        while len(outcomes) < limit:
            claims = self.store.claim_due(
                self.now(), runner_id=self.runner_id, lease_secs=self.lease_secs, limit=1
            )
            if not claims:
                break
            outcomes.append(self.fire(claims[0]))
        return outcomes

    def run_forever(self, stop: threading.Event | None = None) -> None:
        """Call :meth:`run_due` every ``poll_interval_secs`` until ``stop`` is set.

        Storage errors are logged and retried on the next poll rather than ending the loop.
        """
        stop = stop or threading.Event()
        while not stop.is_set():
            try:
                self.run_due()
            except MindfileError:
                log.exception("scheduler pass failed; retrying in %ss", self.poll_interval_secs)
            stop.wait(self.poll_interval_secs)

    def fire(self, claim: ScheduleClaim) -> RunOutcome:
        """Run one claimed occurrence and record it (releasing the lease)."""
        schedule = claim.schedule
        started = self.now()
        try:
            with self._keep_lease(claim):
                result = self._call_handler(schedule)
        except BaseException:
            # Interrupted (Ctrl-C, shutdown): hand the occurrence straight back.
            with contextlib.suppress(MindfileError):
                self.store.release_claim(schedule.schedule_id, claim.token)
            raise
        finished = self.now()
        next_at, new_status = self._plan_next(schedule, claim.scheduled_for, result, finished)
        run = ScheduleRunRecord.build(
            schedule_id=schedule.schedule_id,
            scheduled_for=claim.scheduled_for,
            started_at=started,
            finished_at=finished,
            status=RunStatus.SUCCEEDED if result.ok else RunStatus.FAILED,
            output=result.output,
            turn_count=result.turn_count,
            cost=result.cost,
            notified=schedule.notification_policy.should_notify(succeeded=result.ok),
        )
        error = self._record(claim, run, next_at, new_status)
        if error is None:
            self._after_record(schedule, run)
        return RunOutcome(
            schedule_id=schedule.schedule_id,
            scheduled_for=claim.scheduled_for,
            run=run,
            recorded=error is None,
            next_run_at=iso_or_none(next_at),
            new_status=new_status,
            error=error,
        )

    # -- steps ------------------------------------------------------------------------

    def _call_handler(self, schedule: ScheduleDefinition) -> HandlerResult:
        try:
            result = self.handler(schedule)
        except Exception as exc:  # the agent run failed; that is data, not a crash
            log.warning("schedule %s failed", schedule.schedule_id, exc_info=True)
            return HandlerResult(output=f"{type(exc).__name__}: {exc}", ok=False)
        if result is None:
            return HandlerResult()
        if isinstance(result, str):
            return HandlerResult(output=result)
        if isinstance(result, HandlerResult):
            return result
        return HandlerResult(output=f"handler returned {type(result).__name__}", ok=False)

    def _plan_next(
        self, schedule: ScheduleDefinition, due: str, result: HandlerResult, finished: datetime
    ) -> tuple[datetime | None, ScheduleStatus | None]:
        if schedule.cadence.kind == "once":
            return None, ScheduleStatus.COMPLETED
        next_at = reschedule(schedule.cadence, due_at=due, now=finished)
        if next_at is None:  # a cron that can never fire again
            return None, ScheduleStatus.COMPLETED
        limit = self.max_consecutive_failures
        if not result.ok and limit is not None and schedule.consecutive_failures + 1 >= limit:
            log.warning(
                "pausing schedule %s after %d consecutive failures", schedule.schedule_id, limit
            )
            return next_at, ScheduleStatus.PAUSED
        return next_at, None

    def _record(
        self,
        claim: ScheduleClaim,
        run: ScheduleRunRecord,
        next_at: datetime | None,
        new_status: ScheduleStatus | None,
    ) -> str | None:
        """Record the run; the reason it could not be recorded, or ``None``."""
        try:
            self.store.record_run_and_reschedule(
                claim.schedule.schedule_id, run, next_at, new_status, claim_token=claim.token
            )
        except (ConflictError, NotFoundError) as exc:
            # Lease lost (it expired and another runner took over) or the schedule was
            # deleted mid-run: the other party's state wins.
            log.warning("run of %s not recorded: %s", claim.schedule.schedule_id, exc.message)
            return exc.message
        return None

    def _after_record(self, schedule: ScheduleDefinition, run: ScheduleRunRecord) -> None:
        if self.keep_runs is not None:
            with contextlib.suppress(NotFoundError):
                self.store.prune_run_history(schedule.schedule_id, self.keep_runs)
        if run.notified and self.notifier is not None:
            try:
                self.notifier(schedule, run)
            except Exception:  # a broken channel must not stop the scheduler
                log.exception("notifier failed for run %s", run.run_id)

    @contextlib.contextmanager
    def _keep_lease(self, claim: ScheduleClaim) -> Iterator[None]:
        """Renew the lease in the background while the handler runs."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.lease_secs / 3):
                try:
                    held = self.store.renew_claim(
                        claim.schedule.schedule_id,
                        claim.token,
                        now=self.now(),
                        lease_secs=self.lease_secs,
                    )
                except MindfileError:
                    log.warning("could not renew lease on %s", claim.schedule.schedule_id)
                    continue
                if not held:
                    return

        thread = threading.Thread(target=beat, name="mindfile-lease", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
