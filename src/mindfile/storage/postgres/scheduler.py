"""The Postgres :class:`~mindfile.scheduler.protocol.SchedulerStore`.

The same contract as :class:`mindfile.storage.schedules.SqliteSchedulerStore`, whose
validation (:mod:`mindfile.scheduler._checks`, ``_rules``, cadences) and row mapping
(``storage._schedules_sql.schedule_from_row`` ...) it shares; only the statements and
the locking differ. SQLite serialises writers with ``BEGIN IMMEDIATE``; here every
read-then-write step
locks the schedule's row first (``SELECT ... FOR UPDATE``), and a runner claims due
occurrences with ``FOR UPDATE SKIP LOCKED``, so runners in several processes on several
hosts never take the same occurrence and never wait for each other.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

from mindfile.errors import ConflictError, InvalidInputError, LimitExceededError, NotFoundError
from mindfile.scheduler._checks import MAX_INT, check_int, check_key, check_ref, check_seconds
from mindfile.scheduler._rules import (
    MAX_PAGE_SIZE,
    check_limit,
    plan_update,
)
from mindfile.scheduler._time import TimeLike, iso, iso_or_none, now_utc
from mindfile.scheduler.protocol import SchedulerStore
from mindfile.scheduler.types import (
    RunStatus,
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
    RUN_COLUMNS,
    SCHEDULE_COLUMNS,
    run_from_row,
    run_params,
    schedule_from_row,
    schedule_params,
)
from mindfile.storage.postgres.db import PgDatabase
from mindfile.storage.schedules import MAX_LEASE_SECS, SchedulerStoreBase
from mindfile.storage.schedules import _clock as clock

__all__ = ["PgSchedulerStore"]

_PREFIXED = ", ".join(f"s.{c.strip()}" for c in SCHEDULE_COLUMNS.split(","))

INSERT_SCHEDULE = f"INSERT INTO schedules ({SCHEDULE_COLUMNS}) VALUES ({', '.join(['%s'] * 15)})"
SELECT_SCHEDULE = f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE schedule_id = %s"
LOCK_SCHEDULE = (
    "SELECT next_run_at, status, claim_token FROM schedules WHERE schedule_id = %s FOR UPDATE"
)
# Serialises creates of one user (the per-user cap), across processes: a transaction lock.
LOCK_USER = "SELECT pg_advisory_xact_lock(hashtextextended('mindfile.schedules:' || %s, 0))"
COUNT_USER = "SELECT count(*) FROM schedules WHERE user_id = %s"
COUNT_USER_STATUS = "SELECT count(*) FROM schedules WHERE user_id = %s AND status = %s"
UPDATE_DEFINITION = """
UPDATE schedules
SET name = %s, goal = %s, cadence_json = %s, notification_policy = %s, status = %s,
    updated_at = %s, next_run_at = %s, consecutive_failures = %s, channel_id = %s,
    channel_context_id = %s
WHERE schedule_id = %s
"""
SELECT_DUE = f"""
SELECT {SCHEDULE_COLUMNS} FROM schedules
WHERE status = 'active' AND next_run_at <= %s
ORDER BY next_run_at, schedule_id
LIMIT %s
"""
# Rows another runner is claiming right now are skipped, not waited for; a row it has
# claimed and committed fails the lease test when re-checked on its new version.
CLAIM_DUE = f"""
WITH due AS (
    SELECT schedule_id FROM schedules
    WHERE status = 'active' AND next_run_at <= %(now)s
      AND (claim_expires_at IS NULL OR claim_expires_at <= %(now)s)
    ORDER BY next_run_at, schedule_id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE schedules AS s
SET claim_token = %(token)s, claimed_by = %(runner)s, claim_expires_at = %(expires)s
FROM due WHERE s.schedule_id = due.schedule_id
RETURNING {_PREFIXED}
"""
RENEW_CLAIM = """
UPDATE schedules SET claim_expires_at = %s WHERE schedule_id = %s AND claim_token = %s
"""
RELEASE_CLAIM = """
UPDATE schedules SET claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL
WHERE schedule_id = %s AND claim_token = %s
"""
INSERT_RUN = f"INSERT INTO schedule_runs ({RUN_COLUMNS}) VALUES ({', '.join(['%s'] * 11)})"
RUN_RECORDED = "SELECT 1 FROM schedule_runs WHERE schedule_id = %s AND scheduled_for = %s"
RECORD_ON_SCHEDULE = """
UPDATE schedules
SET last_run_at = %(started)s, last_run_status = %(status)s,
    consecutive_failures = CASE WHEN %(ok)s THEN 0 ELSE consecutive_failures + 1 END,
    next_run_at = %(next_run_at)s, status = %(new_status)s, updated_at = %(updated_at)s,
    claim_token = CASE WHEN %(token)s::text IS NULL THEN claim_token END,
    claimed_by = CASE WHEN %(token)s::text IS NULL THEN claimed_by END,
    claim_expires_at = CASE WHEN %(token)s::text IS NULL THEN claim_expires_at END
WHERE schedule_id = %(schedule_id)s
"""
SELECT_RUNS = f"""
SELECT {RUN_COLUMNS} FROM schedule_runs WHERE schedule_id = %s
ORDER BY started_at DESC, rowid DESC LIMIT %s
"""
SELECT_RUN = f"SELECT {RUN_COLUMNS} FROM schedule_runs WHERE run_id = %s"
PRUNE_RUNS = """
DELETE FROM schedule_runs
WHERE schedule_id = %(id)s AND run_id NOT IN (
    SELECT run_id FROM schedule_runs WHERE schedule_id = %(id)s
    ORDER BY started_at DESC, rowid DESC LIMIT %(keep)s
)
"""


def search_where(user_id: str, filters: ScheduleSearchFilters) -> tuple[str, list[Any]]:
    """The WHERE clause of a search and its parameters (SQLite's, in Postgres terms)."""
    clauses, params = ["user_id = %s"], [user_id]
    if filters.status is not None:
        clauses.append("status = %s")
        params.append(filters.status.value)
    if filters.kind is not None:
        clauses.append("(cadence_json::jsonb ->> 'kind') = %s")
        params.append(filters.kind)
    if filters.channel_id is not None:
        clauses.append("channel_id = %s")
        params.append(filters.channel_id)
    if filters.query:
        # ILIKE under COLLATE "C" folds ASCII letters only, as SQLite's LIKE does.
        pattern = "%" + _escape_like(filters.query) + "%"
        clauses.append("(name ILIKE %s ESCAPE '\\' OR goal ILIKE %s ESCAPE '\\')")
        params.extend([pattern, pattern])
    return " AND ".join(clauses), params


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class PgSchedulerStore(SchedulerStoreBase):
    """Schedules and runs in the ``schedules``/``schedule_runs`` tables of a Postgres
    database; options as :class:`~mindfile.storage.schedules.SchedulerStoreBase`'s."""

    db: PgDatabase

    def create(
        self, definition: ScheduleDefinition, *, now: TimeLike | None = None
    ) -> ScheduleDefinition:
        """Validate and insert; an active schedule without ``next_run_at`` gets one."""
        definition = self._checked(definition, now)
        with self.db.atomic():
            self.db.execute(LOCK_USER, (definition.user_id,))
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

    def _locked(self, schedule_id: str) -> tuple[Any, ...]:
        """Lock the schedule's row for this transaction (:class:`NotFoundError` if gone)."""
        row = self.db.query_one(LOCK_SCHEDULE, (schedule_id,))
        if row is None:
            raise NotFoundError(f"no schedule {schedule_id!r}", schedule_id=schedule_id)
        return row

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
        order = (
            "created_at DESC, schedule_id DESC"
            if filters.order == "created"
            else "next_run_at IS NULL, next_run_at, schedule_id"
        )
        with self.db.snapshot():
            total = int(self.db.scalar(f"SELECT count(*) FROM schedules WHERE {where}", params))
            rows = self.db.query(
                f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE {where} "
                f"ORDER BY {order} LIMIT %s OFFSET %s",
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
            return int(self.db.scalar(COUNT_USER, (user_id,)))
        value = coerce_enum(ScheduleStatus, status, "status").value
        return int(self.db.scalar(COUNT_USER_STATUS, (user_id, value)))

    def delete(self, schedule_id: str) -> ScheduleDefinition:
        """Delete a schedule; its runs go with it (``ON DELETE CASCADE``)."""
        check_key(schedule_id, "schedule_id")
        with self.db.atomic():
            self._locked(schedule_id)
            existing = self.get(schedule_id)
            self.db.execute("DELETE FROM schedules WHERE schedule_id = %s", (schedule_id,))
        return existing

    def update(
        self, schedule_id: str, patch: SchedulePatch, *, now: TimeLike | None = None
    ) -> ScheduleDefinition:
        """Apply ``patch``; see :func:`~mindfile.scheduler._rules.plan_update`."""
        check_key(schedule_id, "schedule_id")
        if not isinstance(patch, SchedulePatch):
            raise InvalidInputError(f"patch must be a SchedulePatch, not {type(patch).__name__}")
        current = clock(now)
        with self.db.atomic():
            self._locked(schedule_id)
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
        rows = self.db.query(SELECT_DUE, (iso(clock(now)), limit))
        return [schedule_from_row(row) for row in rows]

    def claim_due(
        self, now: TimeLike, *, runner_id: str, lease_secs: float, limit: int = 1
    ) -> list[ScheduleClaim]:
        """Lease up to ``limit`` due occurrences that no live lease covers."""
        check_limit(limit)
        check_ref(runner_id, "runner_id")
        lease = check_seconds(lease_secs, "lease_secs", maximum=MAX_LEASE_SECS)
        current = clock(now)
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
        expires = iso(clock(now) + timedelta(seconds=lease))
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
        """Insert ``run`` and move the schedule on, in one transaction (the contract of
        :meth:`mindfile.scheduler.SqliteSchedulerStore.record_run_and_reschedule`)."""
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
            stored_next, stored_status, held = self._locked(schedule_id)
            if claim_token is not None and held != claim_token:
                raise ConflictError(f"lease on schedule {schedule_id} was lost", run=run.run_id)
            replanned = run.scheduled_for is not None and stored_next != run.scheduled_for
            if self.db.scalar(RUN_RECORDED, (schedule_id, run.scheduled_for)):
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
            self._locked(schedule_id)
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


def _conforms(db: PgDatabase) -> SchedulerStore:
    """Never called: lets mypy check that the class implements the protocol."""
    return PgSchedulerStore(db)
