"""The SQLite :class:`~mindfile.scheduler.protocol.SchedulerStore`, on Mindfile's own file.

It lives in ``storage/`` with the other stores' SQL (issue 13); the protocol and the
rules it applies (validation, cadences, record-and-reschedule) stay in
:mod:`mindfile.scheduler`, whose ``SqliteSchedulerStore`` name it still answers to.

Schema: ``storage/migrations/0002_scheduler.sql``. Writes that read first run inside
``Database.atomic()`` (``BEGIN IMMEDIATE``), so they hold SQLite's write lock and
cannot interleave with another process; the runner's claim is one conditional
``UPDATE ... RETURNING`` for the same reason.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from mindfile.errors import (
    ConflictError,
    InvalidInputError,
    LimitExceededError,
    NotFoundError,
)
from mindfile.scheduler._checks import (
    MAX_INT,
    check_int,
    check_key,
    check_ref,
    check_seconds,
)
from mindfile.scheduler._rules import (
    MAX_GOAL_CHARS,
    MAX_NAME_CHARS,
    MAX_PAGE_SIZE,
    check_channel,
    check_limit,
    check_name,
    check_text,
    new_schedule,
    plan_update,
)
from mindfile.scheduler._time import TimeLike, iso, iso_or_none, now_utc, to_utc
from mindfile.scheduler.cadence import next_run_for_cadence, validate_cadence
from mindfile.scheduler.types import (
    MAX_INTERVAL_SECS,
    NotificationPolicy,
    RunStatus,
    ScheduleCadence,
    ScheduleClaim,
    ScheduleDefinition,
    SchedulePatch,
    ScheduleRunRecord,
    ScheduleSearchFilters,
    ScheduleSearchResult,
    ScheduleStatus,
    coerce_enum,
)
from mindfile.storage._schedules_sql import (
    CLAIM_DUE,
    INSERT_RUN,
    INSERT_SCHEDULE,
    PRUNE_RUNS,
    RECORD_ON_SCHEDULE,
    RELEASE_CLAIM,
    RENEW_CLAIM,
    SCHEDULE_COLUMNS,
    SELECT_DUE,
    SELECT_RUN,
    SELECT_RUNS,
    SELECT_SCHEDULE,
    UPDATE_DEFINITION,
    run_from_row,
    run_params,
    schedule_from_row,
    schedule_params,
    search_where,
)
from mindfile.storage.db import Database

__all__ = [
    "MAX_GOAL_CHARS",
    "MAX_LEASE_SECS",
    "MAX_NAME_CHARS",
    "MAX_PAGE_SIZE",
    "SqliteSchedulerStore",
    "new_schedule",
]

#: The longest lease a runner may take or renew (a day; runners renew every third).
MAX_LEASE_SECS = 86_400.0

# Times a store computes with (``now``) stay well inside ``datetime``'s range, so adding
# a cadence (at most MAX_INTERVAL_SECS) or a lease can never overflow.
_EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
_LATEST = datetime(9000, 1, 1, tzinfo=UTC)


def _clock(now: TimeLike | None) -> datetime:
    """``now`` (or the current time) as an aware UTC datetime in the supported range."""
    if now is None:
        return now_utc()
    current = to_utc(now, what="now")
    if not _EARLIEST <= current < _LATEST:
        raise InvalidInputError(f"now must be between {_EARLIEST.year} and {_LATEST.year}")
    return current


class SchedulerStoreBase:
    """What the SQLite and Postgres scheduler stores share: their options, :meth:`add`,
    and the validation of :meth:`create` (each backend writes in its own SQL).

    ``min_interval_secs`` is the shortest cadence accepted on create and update;
    ``max_schedules_per_user`` caps how many schedules one user may hold (an agent
    looping on ``schedule_create`` should hit a limit, not fill the disk).
    """

    def __init__(
        self,
        db: Any,
        *,
        min_interval_secs: int = 60,
        max_schedules_per_user: int = 500,
    ) -> None:
        check_int(min_interval_secs, "min_interval_secs", maximum=MAX_INTERVAL_SECS)
        check_int(max_schedules_per_user, "max_schedules_per_user")
        self.db = db
        self.min_interval_secs = min_interval_secs
        self.max_schedules_per_user = max_schedules_per_user

    # -- schedules ------------------------------------------------------------------

    def add(
        self,
        *,
        user_id: str,
        goal: str,
        cadence: ScheduleCadence,
        name: str | None = None,
        notification_policy: NotificationPolicy | str = NotificationPolicy.ALWAYS,
        channel_id: str | None = None,
        channel_context_id: str | None = None,
        now: TimeLike | None = None,
    ) -> ScheduleDefinition:
        """Convenience: :func:`new_schedule` then :meth:`create`."""
        definition = new_schedule(
            user_id=user_id,
            goal=goal,
            cadence=cadence,
            name=name,
            notification_policy=notification_policy,
            channel_id=channel_id,
            channel_context_id=channel_context_id,
            now=now,
        )
        return self.create(definition, now=now)

    def create(
        self, definition: ScheduleDefinition, *, now: TimeLike | None = None
    ) -> ScheduleDefinition:
        raise NotImplementedError

    def _checked(self, definition: ScheduleDefinition, now: TimeLike | None) -> ScheduleDefinition:
        """``definition`` validated for :meth:`create`; an active one without
        ``next_run_at`` gets one."""
        if not isinstance(definition, ScheduleDefinition):
            raise InvalidInputError(
                f"definition must be a ScheduleDefinition, not {type(definition).__name__}"
            )
        current = _clock(now)
        check_ref(definition.schedule_id, "schedule_id")
        check_text(definition.user_id, "user_id", 200)
        check_text(definition.goal, "goal", MAX_GOAL_CHARS)
        check_name(definition.name)
        check_channel(definition.channel_id, "channel_id")
        check_channel(definition.channel_context_id, "channel_context_id")
        validate_cadence(definition.cadence, self.min_interval_secs, now=current)
        if definition.status is ScheduleStatus.ACTIVE and definition.next_run_at is None:
            upcoming = next_run_for_cadence(definition.cadence, current)
            definition = replace(definition, next_run_at=iso_or_none(upcoming))
        return definition


class SqliteSchedulerStore(SchedulerStoreBase):
    """Schedules and runs in the ``schedules``/``schedule_runs`` tables of ``db``
    (options: :class:`SchedulerStoreBase`)."""

    db: Database

    def create(
        self, definition: ScheduleDefinition, *, now: TimeLike | None = None
    ) -> ScheduleDefinition:
        """Validate and insert; an active schedule without ``next_run_at`` gets one."""
        definition = self._checked(definition, now)
        with self.db.atomic():
            if self.db.scalar(SELECT_SCHEDULE, (definition.schedule_id,)) is not None:
                raise ConflictError(f"schedule {definition.schedule_id} already exists")
            if self.count(definition.user_id) >= self.max_schedules_per_user:
                raise LimitExceededError(
                    f"user {definition.user_id!r} already has "
                    f"{self.max_schedules_per_user} schedules",
                    limit=self.max_schedules_per_user,
                )
            self.db.execute(INSERT_SCHEDULE, schedule_params(definition))
        return definition

    def get(self, schedule_id: str) -> ScheduleDefinition:
        """One schedule by id (:class:`NotFoundError` if missing)."""
        check_key(schedule_id, "schedule_id")
        row = self.db.query_one(SELECT_SCHEDULE, (schedule_id,))
        if row is None:
            raise NotFoundError(f"no schedule {schedule_id!r}", schedule_id=schedule_id)
        return schedule_from_row(row)

    def search(self, user_id: str, filters: ScheduleSearchFilters) -> ScheduleSearchResult:
        """A page of ``user_id``'s schedules: one count query plus one page query."""
        check_key(user_id, "user_id")
        if not isinstance(filters, ScheduleSearchFilters):
            raise InvalidInputError(
                f"filters must be ScheduleSearchFilters, not {type(filters).__name__}"
            )
        if filters.limit > MAX_PAGE_SIZE:
            raise LimitExceededError(f"limit must be at most {MAX_PAGE_SIZE}")
        where, params = search_where(user_id, filters)
        total = int(self.db.scalar(f"SELECT count(*) FROM schedules WHERE {where}", params))
        order = (
            "created_at DESC, schedule_id DESC"
            if filters.order == "created"
            else "next_run_at IS NULL, next_run_at, schedule_id"
        )
        rows = self.db.query(
            f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE {where} "
            f"ORDER BY {order} LIMIT ? OFFSET ?",
            [*params, filters.limit, filters.offset],
        )
        items = tuple(schedule_from_row(row) for row in rows)
        return ScheduleSearchResult(
            items=items, total=total, limit=filters.limit, offset=filters.offset
        )

    def count(self, user_id: str, *, status: ScheduleStatus | None = None) -> int:
        """How many schedules ``user_id`` has, optionally only in ``status``."""
        check_key(user_id, "user_id")
        if status is None:
            sql, params = "SELECT count(*) FROM schedules WHERE user_id = ?", [user_id]
        else:
            sql = "SELECT count(*) FROM schedules WHERE user_id = ? AND status = ?"
            params = [user_id, coerce_enum(ScheduleStatus, status, "status").value]
        return int(self.db.scalar(sql, params))

    def delete(self, schedule_id: str) -> ScheduleDefinition:
        """Delete a schedule; its runs go with it (``ON DELETE CASCADE``)."""
        check_key(schedule_id, "schedule_id")
        with self.db.atomic():
            existing = self.get(schedule_id)
            self.db.execute("DELETE FROM schedules WHERE schedule_id = ?", (schedule_id,))
        return existing

    def update(
        self, schedule_id: str, patch: SchedulePatch, *, now: TimeLike | None = None
    ) -> ScheduleDefinition:
        """Apply ``patch``; see :func:`plan_update` for how ``next_run_at`` moves."""
        check_key(schedule_id, "schedule_id")
        if not isinstance(patch, SchedulePatch):
            raise InvalidInputError(f"patch must be a SchedulePatch, not {type(patch).__name__}")
        current = _clock(now)
        with self.db.atomic():
            existing = self.get(schedule_id)
            if patch.is_empty():
                return existing
            updated = plan_update(existing, patch, current, self.min_interval_secs)
            self.db.execute(
                UPDATE_DEFINITION,
                (
                    updated.name,
                    updated.goal,
                    json.dumps(updated.cadence.to_dict()),
                    updated.notification_policy.value,
                    updated.status.value,
                    updated.updated_at,
                    updated.next_run_at,
                    updated.consecutive_failures,
                    updated.channel_id,
                    updated.channel_context_id,
                    schedule_id,
                ),
            )
        return updated

    # -- due work and leases --------------------------------------------------------------

    def due_schedules(self, now: TimeLike, limit: int) -> list[ScheduleDefinition]:
        """Active schedules due at ``now``, soonest first, leased or not."""
        check_limit(limit)
        rows = self.db.query(SELECT_DUE, (iso(_clock(now)), limit))
        return [schedule_from_row(row) for row in rows]

    def claim_due(
        self, now: TimeLike, *, runner_id: str, lease_secs: float, limit: int = 1
    ) -> list[ScheduleClaim]:
        """Lease up to ``limit`` due occurrences that no live lease covers.

        One ``UPDATE ... RETURNING`` under ``BEGIN IMMEDIATE``: a row is handed to at
        most one caller until its lease expires or the run is recorded.
        """
        check_limit(limit)
        check_ref(runner_id, "runner_id")
        lease = check_seconds(lease_secs, "lease_secs", maximum=MAX_LEASE_SECS)
        current = _clock(now)
        token = f"{runner_id}:{uuid.uuid4()}"
        expires = iso(current + timedelta(seconds=lease))
        params = {
            "token": token, "runner": runner_id, "expires": expires,
            "now": iso(current), "limit": limit,
        }  # fmt: skip
        with self.db.atomic():
            rows = self.db.query(CLAIM_DUE, params)
        schedules = sorted(
            (schedule_from_row(row) for row in rows),
            key=lambda s: (s.next_run_at or "", s.schedule_id),
        )
        return [
            ScheduleClaim(schedule=s, token=token, runner_id=runner_id, expires_at=expires)
            for s in schedules
        ]

    def renew_claim(
        self, schedule_id: str, token: str, *, now: TimeLike, lease_secs: float
    ) -> bool:
        """Push a held lease's expiry to ``now + lease_secs``."""
        check_key(schedule_id, "schedule_id")
        check_key(token, "token")
        lease = check_seconds(lease_secs, "lease_secs", maximum=MAX_LEASE_SECS)
        expires = iso(_clock(now) + timedelta(seconds=lease))
        with self.db.atomic():
            self.db.execute(RENEW_CLAIM, (expires, schedule_id, token))
            return self.db.changes() > 0

    def release_claim(self, schedule_id: str, token: str) -> bool:
        """Drop a held lease so another runner may take the occurrence at once."""
        check_key(schedule_id, "schedule_id")
        check_key(token, "token")
        with self.db.atomic():
            self.db.execute(RELEASE_CLAIM, (schedule_id, token))
            return self.db.changes() > 0

    def record_run_and_reschedule(
        self,
        schedule_id: str,
        run: ScheduleRunRecord,
        next_run_at: TimeLike | None,
        new_status: ScheduleStatus | None = None,
        *,
        claim_token: str | None = None,
    ) -> None:
        """Insert ``run`` and move the schedule on, all in one transaction.

        Sets ``last_run_*``, resets or bumps ``consecutive_failures``, then sets
        ``next_run_at`` and (if given) ``new_status``. With ``claim_token`` the caller
        must still hold the lease (else :class:`ConflictError`, nothing written), and the
        lease is released. If the schedule was re-planned while the run was in flight
        (its ``next_run_at`` is no longer ``run.scheduled_for``), the user's plan wins:
        ``next_run_at`` and ``status`` are left as they are. A second record for the same
        ``scheduled_for`` raises :class:`ConflictError`.
        """
        check_key(schedule_id, "schedule_id")
        if not isinstance(run, ScheduleRunRecord):
            raise InvalidInputError(f"run must be a ScheduleRunRecord, not {type(run).__name__}")
        if run.schedule_id != schedule_id:
            raise InvalidInputError("run.schedule_id does not match schedule_id")
        next_at = iso_or_none(next_run_at, what="next_run_at")
        if new_status is not None:
            new_status = coerce_enum(ScheduleStatus, new_status, "new_status")
        if claim_token is not None:
            check_key(claim_token, "claim_token")
        with self.db.atomic():
            row = self.db.query_one(
                "SELECT next_run_at, status, claim_token FROM schedules WHERE schedule_id = ?",
                (schedule_id,),
            )
            if row is None:
                raise NotFoundError(f"no schedule {schedule_id!r}", schedule_id=schedule_id)
            stored_next, stored_status, held = row
            if claim_token is not None and held != claim_token:
                raise ConflictError(f"lease on schedule {schedule_id} was lost", run=run.run_id)
            replanned = run.scheduled_for is not None and stored_next != run.scheduled_for
            if self.db.scalar(
                "SELECT 1 FROM schedule_runs WHERE schedule_id = ? AND scheduled_for = ?",
                (schedule_id, run.scheduled_for),
            ):
                raise ConflictError(f"occurrence {run.scheduled_for} was already recorded")
            self.db.execute(INSERT_RUN, run_params(run))
            status = stored_status if replanned or new_status is None else new_status.value
            self.db.execute(
                RECORD_ON_SCHEDULE,
                {
                    "started": run.started_at,
                    "status": run.status.value,
                    "ok": run.status is RunStatus.SUCCEEDED,
                    "next_run_at": stored_next if replanned else next_at,
                    "new_status": status,
                    "updated_at": iso(now_utc()),
                    "token": claim_token,
                    "schedule_id": schedule_id,
                },
            )

    # -- run history ----------------------------------------------------------------------

    def prune_run_history(self, schedule_id: str, keep: int) -> int:
        """Keep the ``keep`` newest runs of a schedule; returns how many were deleted."""
        check_key(schedule_id, "schedule_id")
        check_int(keep, "keep", maximum=MAX_INT)
        with self.db.atomic():
            self.get(schedule_id)
            self.db.execute(PRUNE_RUNS, {"id": schedule_id, "keep": keep})
            return self.db.changes()

    def get_run_history(self, schedule_id: str, limit: int = 20) -> list[ScheduleRunRecord]:
        """The ``limit`` newest runs of a schedule, newest first."""
        check_limit(limit)
        self.get(schedule_id)
        return [run_from_row(row) for row in self.db.query(SELECT_RUNS, (schedule_id, limit))]

    def get_run_by_id(self, run_id: str) -> ScheduleRunRecord:
        """One run by id (:class:`NotFoundError` if missing)."""
        check_key(run_id, "run_id")
        row = self.db.query_one(SELECT_RUN, (run_id,))
        if row is None:
            raise NotFoundError(f"no run {run_id!r}", run_id=run_id)
        return run_from_row(row)
