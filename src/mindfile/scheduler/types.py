"""The scheduler's value types: frozen, row-major dataclasses with ``to_dict()``.

Timestamps are canonical ISO-8601 UTC strings (see :mod:`mindfile.scheduler._time`);
constructors normalise any aware datetime or offset-carrying string to that form.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import Enum, StrEnum
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mindfile.errors import InvalidInputError
from mindfile.scheduler._checks import check_int, check_ref, check_str, optional_str
from mindfile.scheduler._time import TimeLike, iso, iso_or_none

__all__ = [
    "CADENCE_KINDS",
    "MAX_INTERVAL_SECS",
    "OUTPUT_SUMMARY_CHARS",
    "CadenceKind",
    "NotificationPolicy",
    "RunStatus",
    "ScheduleCadence",
    "ScheduleClaim",
    "ScheduleDefinition",
    "SchedulePatch",
    "ScheduleRunRecord",
    "ScheduleSearchFilters",
    "ScheduleSearchResult",
    "ScheduleStatus",
    "check_timezone",
    "coerce_enum",
]

CadenceKind = Literal["cron", "once", "interval"]
CADENCE_KINDS: tuple[CadenceKind, ...] = ("cron", "once", "interval")

#: Ten years: far beyond any real cadence, and keeps date arithmetic clear of year 9999.
MAX_INTERVAL_SECS = 10 * 366 * 86_400

#: ``output_summary`` holds the first this-many characters of a run's output (seed).
OUTPUT_SUMMARY_CHARS = 500


class ScheduleStatus(StrEnum):
    """Lifecycle of a schedule. Only ``active`` schedules are ever due."""

    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETED = "completed"


class NotificationPolicy(StrEnum):
    """When a run should notify the user (recorded in ``schedule_runs.notified``)."""

    ALWAYS = "always"
    ON_FAILURE = "on_failure"
    NEVER = "never"

    def should_notify(self, *, succeeded: bool) -> bool:
        """Whether a run with this outcome notifies under this policy."""
        if self is NotificationPolicy.ALWAYS:
            return True
        return self is NotificationPolicy.ON_FAILURE and not succeeded


class RunStatus(StrEnum):
    """Outcome of one run."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"


def coerce_enum(kind: type[Any], value: Any, what: str) -> Any:
    """``kind(value)``, or :class:`InvalidInputError` naming the allowed values."""
    try:
        return kind(value)
    except (ValueError, TypeError):
        allowed = ", ".join(m.value for m in kind)
        raise InvalidInputError(f"{what} must be one of {allowed}; got {value!r}") from None


def check_timezone(name: str) -> str:
    """``name`` if it is a known IANA time zone, else :class:`InvalidInputError`."""
    if not isinstance(name, str) or not 0 < len(name) <= 128 or "\x00" in name:
        raise InvalidInputError(f"unknown IANA time zone: {str(name)[:128]!r}")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError, OSError):
        raise InvalidInputError(f"unknown IANA time zone: {name!r}") from None
    return name


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleCadence:
    """When a schedule fires: a cron expression, a one-shot time, or a fixed interval.

    Build one with :meth:`cron`, :meth:`once` or :meth:`interval`. ``timezone`` is the
    IANA zone a cron expression is evaluated in; for the other kinds it is only used to
    display times. Construction checks shape only; :func:`validate_cadence` checks
    semantics (future one-shot, cron spacing, minimum interval).
    """

    kind: CadenceKind
    timezone: str = "UTC"
    expression: str | None = None
    at: str | None = None
    every_secs: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or self.kind not in CADENCE_KINDS:
            raise InvalidInputError(f"cadence kind must be one of {', '.join(CADENCE_KINDS)}")
        check_timezone(self.timezone)
        if self.expression is not None:
            check_str(self.expression, "cron expression")
        if self.at is not None and not isinstance(self.at, str | datetime):
            raise InvalidInputError("one-shot time must be a datetime or an ISO-8601 string")
        present = {
            "cron": self.expression is not None,
            "once": self.at is not None,
            "interval": self.every_secs is not None,
        }
        if not present[self.kind] or sum(present.values()) != 1:
            raise InvalidInputError(f"a {self.kind} cadence needs exactly its own value")
        if self.kind == "cron" and not str(self.expression).strip():
            raise InvalidInputError("cron expression is empty")
        if self.kind == "once":
            object.__setattr__(self, "at", iso(self.at, what="one-shot time"))  # type: ignore[arg-type]
        if self.kind == "interval":
            every = self.every_secs
            if isinstance(every, bool) or not isinstance(every, int) or every <= 0:
                raise InvalidInputError("interval must be a positive whole number of seconds")
            if every > MAX_INTERVAL_SECS:
                raise InvalidInputError(f"interval is longer than {MAX_INTERVAL_SECS} seconds")

    @classmethod
    def cron(cls, expression: str, *, timezone: str = "UTC") -> ScheduleCadence:
        """A five-field cron expression evaluated on ``timezone``'s wall clock."""
        return cls(
            kind="cron", expression=check_str(expression, "cron expression").strip(),
            timezone=timezone,
        )  # fmt: skip

    @classmethod
    def once(cls, at: TimeLike, *, timezone: str = "UTC") -> ScheduleCadence:
        """Fire once at ``at`` (an aware datetime or an ISO string with an offset)."""
        return cls(kind="once", at=iso(at, what="one-shot time"), timezone=timezone)

    @classmethod
    def interval(cls, every_secs: int, *, timezone: str = "UTC") -> ScheduleCadence:
        """Fire every ``every_secs`` seconds of elapsed time (DST does not matter)."""
        return cls(kind="interval", every_secs=every_secs, timezone=timezone)

    def to_dict(self) -> dict[str, Any]:
        """``{"kind": ..., "timezone": ..., <the kind's own field>: ...}``."""
        out: dict[str, Any] = {"kind": self.kind, "timezone": self.timezone}
        if self.kind == "cron":
            out["expression"] = self.expression
        elif self.kind == "once":
            out["at"] = self.at
        else:
            out["every_secs"] = self.every_secs
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScheduleCadence:
        """Inverse of :meth:`to_dict` (also reads ``cadence_json`` rows)."""
        if not isinstance(data, dict):
            raise InvalidInputError("cadence must be an object")
        known = {"kind", "timezone", "expression", "at", "every_secs"}
        unknown = set(data) - known
        if unknown:
            raise InvalidInputError(f"unknown cadence fields: {', '.join(sorted(unknown))}")
        return cls(**data)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleDefinition:
    """One durable schedule (a row of ``schedules``)."""

    schedule_id: str
    user_id: str
    goal: str
    cadence: ScheduleCadence
    name: str | None = None
    notification_policy: NotificationPolicy = NotificationPolicy.ALWAYS
    status: ScheduleStatus = ScheduleStatus.ACTIVE
    created_at: str
    updated_at: str
    next_run_at: str | None = None
    last_run_at: str | None = None
    last_run_status: RunStatus | None = None
    consecutive_failures: int = 0
    channel_id: str | None = None
    channel_context_id: str | None = None

    def __post_init__(self) -> None:
        check_ref(self.schedule_id, "schedule_id")
        check_str(self.user_id, "user_id")
        check_str(self.goal, "goal")
        if not isinstance(self.cadence, ScheduleCadence):
            raise InvalidInputError("cadence must be a ScheduleCadence")
        for name in ("name", "channel_id", "channel_context_id"):
            optional_str(getattr(self, name), name)
        check_int(self.consecutive_failures, "consecutive_failures")
        if self.created_at is None or self.updated_at is None:
            raise InvalidInputError("created_at and updated_at are required")
        object.__setattr__(
            self,
            "notification_policy",
            coerce_enum(NotificationPolicy, self.notification_policy, "notification_policy"),
        )
        object.__setattr__(self, "status", coerce_enum(ScheduleStatus, self.status, "status"))
        if self.last_run_status is not None:
            object.__setattr__(
                self, "last_run_status", coerce_enum(RunStatus, self.last_run_status, "run status")
            )
        for name in ("created_at", "updated_at", "next_run_at", "last_run_at"):
            object.__setattr__(self, name, iso_or_none(getattr(self, name), what=name))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (enums as their values, cadence as a dict)."""
        return {
            "schedule_id": self.schedule_id,
            "user_id": self.user_id,
            "name": self.name,
            "goal": self.goal,
            "cadence": self.cadence.to_dict(),
            "notification_policy": self.notification_policy.value,
            "status": self.status.value,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "next_run_at": self.next_run_at,
            "last_run_at": self.last_run_at,
            "last_run_status": None if self.last_run_status is None else self.last_run_status.value,
            "consecutive_failures": self.consecutive_failures,
            "channel_id": self.channel_id,
            "channel_context_id": self.channel_context_id,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulePatch:
    """A partial update. ``None`` leaves a field alone; ``name=""`` clears the name."""

    name: str | None = None
    goal: str | None = None
    cadence: ScheduleCadence | None = None
    notification_policy: NotificationPolicy | None = None
    status: ScheduleStatus | None = None
    channel_id: str | None = None
    channel_context_id: str | None = None

    def __post_init__(self) -> None:
        for name in ("name", "goal", "channel_id", "channel_context_id"):
            optional_str(getattr(self, name), name)
        if self.cadence is not None and not isinstance(self.cadence, ScheduleCadence):
            raise InvalidInputError(
                f"cadence must be a ScheduleCadence, not {type(self.cadence).__name__}"
            )
        if self.notification_policy is not None:
            object.__setattr__(
                self,
                "notification_policy",
                coerce_enum(NotificationPolicy, self.notification_policy, "notification_policy"),
            )
        if self.status is not None:
            object.__setattr__(self, "status", coerce_enum(ScheduleStatus, self.status, "status"))

    def is_empty(self) -> bool:
        """True when the patch changes nothing."""
        return all(getattr(self, f.name) is None for f in fields(self))

    def to_dict(self) -> dict[str, Any]:
        """The fields this patch sets."""
        out: dict[str, Any] = {}
        for f in fields(self):
            name, value = f.name, getattr(self, f.name)
            if value is None:
                continue
            out[name] = (
                value.to_dict()
                if isinstance(value, ScheduleCadence)
                else (value.value if isinstance(value, Enum) else value)
            )
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleSearchFilters:
    """Filters and pagination for :meth:`SchedulerStore.search`.

    ``query`` matches a case-insensitive substring of the name or goal. ``order`` is
    ``created`` (newest first) or ``next_run`` (soonest first, unscheduled last).
    """

    status: ScheduleStatus | None = None
    kind: CadenceKind | None = None
    query: str | None = None
    channel_id: str | None = None
    order: Literal["created", "next_run"] = "created"
    limit: int = 20
    offset: int = 0

    def __post_init__(self) -> None:
        if self.status is not None:
            object.__setattr__(self, "status", coerce_enum(ScheduleStatus, self.status, "status"))
        if self.kind is not None and (
            not isinstance(self.kind, str) or self.kind not in CADENCE_KINDS
        ):
            raise InvalidInputError(f"kind must be one of {', '.join(CADENCE_KINDS)}")
        if not isinstance(self.order, str) or self.order not in ("created", "next_run"):
            raise InvalidInputError("order must be 'created' or 'next_run'")
        optional_str(self.query, "query")
        optional_str(self.channel_id, "channel_id")
        check_int(self.limit, "limit", minimum=1)
        check_int(self.offset, "offset")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleSearchResult:
    """One page of schedules plus the total number matching the filters."""

    items: tuple[ScheduleDefinition, ...]
    total: int
    limit: int
    offset: int

    @property
    def next_offset(self) -> int | None:
        """The offset of the next page, or ``None`` on the last page."""
        end = self.offset + len(self.items)
        return end if end < self.total else None

    def to_dict(self) -> dict[str, Any]:
        """Row-major: ``{"items": [...], "total", "limit", "offset", "next_offset"}``."""
        return {
            "items": [item.to_dict() for item in self.items],
            "total": self.total,
            "limit": self.limit,
            "offset": self.offset,
            "next_offset": self.next_offset,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleRunRecord:
    """One execution of a schedule (a row of ``schedule_runs``).

    ``scheduled_for`` is the occurrence the run fired for (``None`` for a manual run);
    the store refuses a second record for the same occurrence.
    """

    run_id: str
    schedule_id: str
    started_at: str
    finished_at: str
    status: RunStatus
    output_summary: str | None = None
    output: str | None = None
    turn_count: int = 0
    cost: float = 0.0
    notified: bool = False
    scheduled_for: str | None = None

    def __post_init__(self) -> None:
        check_ref(self.run_id, "run_id")
        check_str(self.schedule_id, "schedule_id")
        object.__setattr__(self, "status", coerce_enum(RunStatus, self.status, "run status"))
        if self.started_at is None or self.finished_at is None:
            raise InvalidInputError("started_at and finished_at are required")
        for name in ("started_at", "finished_at", "scheduled_for"):
            object.__setattr__(self, name, iso_or_none(getattr(self, name), what=name))
        optional_str(self.output_summary, "output_summary")
        optional_str(self.output, "output")
        check_int(self.turn_count, "turn_count")
        cost = self.cost
        if isinstance(cost, bool) or not isinstance(cost, int | float):
            raise InvalidInputError("cost must be a number")
        try:
            cost = float(cost)
        except OverflowError:
            raise InvalidInputError("cost is out of range") from None
        if not math.isfinite(cost) or cost < 0:
            raise InvalidInputError("cost must be a finite, non-negative number")
        object.__setattr__(self, "cost", cost)
        if not isinstance(self.notified, bool | int) or self.notified not in (0, 1):
            raise InvalidInputError("notified must be a bool")
        object.__setattr__(self, "notified", bool(self.notified))

    @classmethod
    def build(
        cls,
        *,
        schedule_id: str,
        started_at: TimeLike,
        finished_at: TimeLike,
        status: RunStatus,
        output: str | None = None,
        turn_count: int = 0,
        cost: float = 0.0,
        notified: bool = False,
        scheduled_for: TimeLike | None = None,
    ) -> ScheduleRunRecord:
        """A new record with a fresh ``run-…`` id and the 500-character summary."""
        return cls(
            run_id=f"run-{uuid.uuid4()}",
            schedule_id=schedule_id,
            started_at=iso(started_at),
            finished_at=iso(finished_at),
            status=status,
            output_summary=None if not isinstance(output, str) else output[:OUTPUT_SUMMARY_CHARS],
            output=output,
            turn_count=turn_count,
            cost=cost,
            notified=notified,
            scheduled_for=iso_or_none(scheduled_for),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return {
            "run_id": self.run_id,
            "schedule_id": self.schedule_id,
            "scheduled_for": self.scheduled_for,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "status": self.status.value,
            "output_summary": self.output_summary,
            "output": self.output,
            "turn_count": self.turn_count,
            "cost": self.cost,
            "notified": self.notified,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleClaim:
    """A runner's lease on one due occurrence (see :meth:`SchedulerStore.claim_due`)."""

    schedule: ScheduleDefinition
    token: str
    runner_id: str
    expires_at: str
    scheduled_for: str = field(init=False)

    def __post_init__(self) -> None:
        # A claimed schedule is always due, so next_run_at is the occurrence claimed.
        if self.schedule.next_run_at is None:
            raise InvalidInputError("a claimed schedule must have a next_run_at")
        object.__setattr__(self, "scheduled_for", self.schedule.next_run_at)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return {
            "schedule": self.schedule.to_dict(),
            "token": self.token,
            "runner_id": self.runner_id,
            "expires_at": self.expires_at,
            "scheduled_for": self.scheduled_for,
        }
