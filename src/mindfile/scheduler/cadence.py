"""Cadence math: when does a schedule fire next, and is a cadence acceptable?

Cron expressions are evaluated on the *wall clock* of the cadence's IANA time zone
(croniter on naive local times, zoneinfo to map them to UTC), with one daylight-saving
rule that follows from "each wall-clock match fires at most once":

* A wall-clock time that happens twice (the autumn fall-back hour) fires once, at its
  first occurrence. Hourly and sub-hourly crons therefore skip the repeated hour's
  second pass; use an ``interval`` cadence for strict elapsed-time spacing.
* A wall-clock time that does not exist (the spring-forward gap) fires at the next valid
  time, the first instant after the gap: a daily ``30 2 * * *`` in America/New_York
  fires at 03:00 EDT on the spring-forward day. Several matches inside one gap collapse
  into that single firing.

``interval`` cadences are exact elapsed durations in UTC; ``once`` fires at one instant.
"""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from mindfile.errors import InvalidInputError
from mindfile.scheduler._time import TimeLike, now_utc, to_utc
from mindfile.scheduler.types import (
    CADENCE_KINDS,
    MAX_INTERVAL_SECS,
    ScheduleCadence,
    check_timezone,
)

__all__ = [
    "cadence_value",
    "format_in_timezone",
    "next_run_for_cadence",
    "parse_cadence",
    "parse_duration",
    "reschedule",
    "revise_cadence",
    "validate_cadence",
]

CRON_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_UNITS = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86_400, "day": 86_400, "days": 86_400,
    "w": 604_800, "week": 604_800, "weeks": 604_800,
}  # fmt: skip
_DURATION_PART = re.compile(r"(\d+)\s*([a-z]+)")
_DURATION_FILLER = re.compile(r"[\s,]+|\band\b")

# Bounds for the loops below; a real cron never gets near them.
_MAX_CANDIDATES = 5_000
# 2000 is a leap year starting on a Saturday: every day-of-month, month and weekday
# combination (Feb 29 and Dec 31 -> Jan 1 included) occurs in it, so one year suffices.
_DAY_SCAN_START = datetime(2000, 1, 1)
_DAY_SCAN_END = datetime(2001, 1, 2)


# -- cron on a wall clock -------------------------------------------------------------


def normalise_cron(expression: str) -> str:
    """A five-field cron expression (aliases such as ``@daily`` expanded), or an error."""
    expr = " ".join(expression.split())
    expr = CRON_ALIASES.get(expr.lower(), expr)
    if len(expr.split(" ")) != 5:
        raise InvalidInputError(
            f"cron expression must have five fields (minute hour day month weekday): {expression!r}"
        )
    try:
        croniter(expr, datetime(2000, 1, 1))
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(f"invalid cron expression {expression!r}: {exc}") from None
    return expr


def _wall_to_utc(wall: datetime, zone: ZoneInfo) -> datetime:
    """The UTC instant of a naive wall-clock time, under the module's DST rule."""
    first = wall.replace(tzinfo=zone, fold=0)
    second = wall.replace(tzinfo=zone, fold=1)
    if first.utcoffset() == second.utcoffset():
        return first.astimezone(UTC)
    exists = first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall
    u0, u1 = first.astimezone(UTC), second.astimezone(UTC)
    if exists:  # ambiguous: fire at the first occurrence
        return min(u0, u1)
    return _transition_between(min(u0, u1), max(u0, u1), zone)


def _transition_between(lo: datetime, hi: datetime, zone: ZoneInfo) -> datetime:
    """The first instant in ``(lo, hi]`` whose UTC offset is ``hi``'s (the gap's end)."""
    target = hi.astimezone(zone).utcoffset()
    lo_s, hi_s = int(lo.timestamp()), int(hi.timestamp())
    while hi_s - lo_s > 1:
        mid = (lo_s + hi_s) // 2
        if datetime.fromtimestamp(mid, zone).utcoffset() == target:
            hi_s = mid
        else:
            lo_s = mid
    return datetime.fromtimestamp(hi_s, UTC)


def _next_cron(expression: str, timezone: str, after: datetime) -> datetime | None:
    zone = ZoneInfo(timezone)
    wall_after = after.astimezone(zone).replace(tzinfo=None)
    try:
        matches = croniter(normalise_cron(expression), wall_after)
        for _ in range(_MAX_CANDIDATES):
            instant = _wall_to_utc(matches.get_next(datetime), zone)
            # In a repeated hour the wall clock runs behind `after`; a match there may
            # be the already-fired first occurrence, so the UTC check decides.
            if instant > after:
                return instant
    except (ValueError, KeyError, TypeError):  # croniter: no match in its search horizon
        return None
    return None


def _fires_on_consecutive_days(expression: str) -> bool:
    dom, month, dow = expression.split(" ")[2:]
    days = croniter(f"0 0 {dom} {month} {dow}", _DAY_SCAN_START - timedelta(days=1))
    try:
        previous = days.get_next(datetime)
        while previous < _DAY_SCAN_END:
            day = days.get_next(datetime)
            if day - previous == timedelta(days=1):
                return True
            previous = day
    except ValueError:  # croniter found no further day
        return False
    return False


def _cron_min_spacing_secs(expression: str) -> int:
    """The shortest wall-clock gap between two firings (at least a day if none is shorter).

    Fires within a day are the same set of times on every firing day, so the gaps are
    the differences inside that set plus, when two calendar days in a row fire, the
    wrap from the last time of one day to the first of the next.
    """
    fields, _ = croniter.expand(expression)
    minutes = range(60) if fields[0] == ["*"] else [int(m) for m in fields[0]]
    hours = range(24) if fields[1] == ["*"] else [int(h) for h in fields[1]]
    times = sorted(h * 60 + m for h in hours for m in minutes)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    best = min(gaps, default=1440)
    wrap = 1440 - times[-1] + times[0]
    if wrap < best and _fires_on_consecutive_days(expression):
        best = wrap
    return best * 60


# -- public API -------------------------------------------------------------------------


def next_run_for_cadence(cadence: ScheduleCadence, after: TimeLike) -> datetime | None:
    """The first firing strictly after ``after`` (aware UTC), or ``None`` if there is none.

    ``once`` returns its time if it is still ahead; ``interval`` returns
    ``after + every_secs``; ``cron`` follows the module's DST rule.
    """
    start = to_utc(after, what="after")
    if cadence.kind == "once":
        at = to_utc(str(cadence.at))
        return at if at > start else None
    if cadence.kind == "interval":
        return start + timedelta(seconds=int(cadence.every_secs or 0))
    return _next_cron(str(cadence.expression), cadence.timezone, start)


def reschedule(cadence: ScheduleCadence, *, due_at: TimeLike, now: TimeLike) -> datetime | None:
    """The next firing after a run of the occurrence ``due_at`` that finished at ``now``.

    Missed-run policy: however many occurrences were missed (downtime), the run that
    just happened stands for all of them and the next firing is strictly after ``now``
    - never a burst. Intervals keep their phase: the result is ``due_at + k * every``
    for the smallest ``k >= 1`` that lands after ``now`` (exact integer arithmetic).
    ``once`` has no next firing.
    """
    due, current = to_utc(due_at, what="due_at"), to_utc(now, what="now")
    if cadence.kind == "once":
        return None
    if cadence.kind == "interval":
        step = timedelta(seconds=int(cadence.every_secs or 0))
        k = 1 if current < due else (current - due) // step + 1
        return due + k * step
    return _next_cron(str(cadence.expression), cadence.timezone, max(due, current))


def validate_cadence(
    cadence: ScheduleCadence, min_interval_secs: int = 60, *, now: TimeLike | None = None
) -> None:
    """Raise :class:`InvalidInputError` unless ``cadence`` is acceptable for a new schedule.

    One-shot times must be in the future; cron expressions must parse, fire at all, and
    leave at least ``min_interval_secs`` between firings (measured on the wall clock);
    intervals must be at least ``min_interval_secs`` long.
    """
    if min_interval_secs < 0:
        raise InvalidInputError("min_interval_secs must not be negative")
    current = now_utc() if now is None else to_utc(now, what="now")
    if cadence.kind == "once":
        if to_utc(str(cadence.at)) <= current:
            raise InvalidInputError(f"one-shot time {cadence.at} is not in the future")
        return
    if cadence.kind == "interval":
        if int(cadence.every_secs or 0) < min_interval_secs:
            raise InvalidInputError(
                f"interval of {cadence.every_secs}s is shorter than the minimum of "
                f"{min_interval_secs}s"
            )
        return
    expression = normalise_cron(str(cadence.expression))
    if _next_cron(expression, cadence.timezone, current) is None:
        raise InvalidInputError(f"cron expression {cadence.expression!r} never fires")
    spacing = _cron_min_spacing_secs(expression)
    if spacing < min_interval_secs:
        raise InvalidInputError(
            f"cron expression {cadence.expression!r} fires {spacing}s apart; the minimum "
            f"is {min_interval_secs}s"
        )


def parse_duration(text: str) -> int:
    """Seconds in ``"3600"``, ``"90s"``, ``"15m"``, ``"1h30m"``, ``"2 days"``, ``"1w"``..."""
    cleaned = text.strip().lower()
    if cleaned.isdigit():
        total = int(cleaned)
    else:
        total, consumed = 0, _DURATION_FILLER.sub("", cleaned)
        for number, unit in _DURATION_PART.findall(cleaned):
            if unit not in _UNITS:
                raise InvalidInputError(f"unknown duration unit {unit!r} in {text!r}")
            total += int(number) * _UNITS[unit]
            consumed = consumed.replace(f"{number}{unit}", "", 1)
        if consumed or not cleaned:
            raise InvalidInputError(f"not a duration: {text!r} (try '90s', '15m', '1h30m')")
    if total <= 0 or total > MAX_INTERVAL_SECS:
        raise InvalidInputError(f"duration out of range: {text!r}")
    return total


def _parse_once(value: str, timezone: str, now: TimeLike | None) -> ScheduleCadence:
    text = value.strip()
    lowered = text.lower()
    if lowered.startswith(("in ", "+")):
        base = now_utc() if now is None else to_utc(now, what="now")
        offset = parse_duration(lowered.removeprefix("in ").removeprefix("+"))
        return ScheduleCadence.once(base + timedelta(seconds=offset), timezone=timezone)
    try:
        parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        raise InvalidInputError(f"one-shot time is not an ISO-8601 timestamp: {value!r}") from None
    if parsed.tzinfo is None:  # a wall-clock time in the given zone (same DST rule as cron)
        parsed = _wall_to_utc(parsed, ZoneInfo(timezone))
    return ScheduleCadence.once(parsed, timezone=timezone)


def parse_cadence(
    kind: str, value: str, timezone: str | None = "UTC", *, now: TimeLike | None = None
) -> ScheduleCadence:
    """Build a cadence from tool or CLI arguments.

    * ``cron``: a five-field expression or an alias (``@daily``, ``@hourly``...),
      evaluated in ``timezone``.
    * ``once``: an ISO-8601 time; one without an offset is a wall-clock time in
      ``timezone``. ``"in 2h"`` / ``"+2h"`` mean that long after ``now``.
    * ``interval``: seconds (``"3600"``) or a duration (``"1h30m"``, ``"2 days"``).
    """
    zone = check_timezone(timezone or "UTC")
    if kind not in CADENCE_KINDS:
        raise InvalidInputError(f"cadence type must be one of {', '.join(CADENCE_KINDS)}")
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError("cadence value is empty")
    if kind == "cron":
        return ScheduleCadence.cron(normalise_cron(value), timezone=zone)
    if kind == "once":
        return _parse_once(value, zone, now)
    return ScheduleCadence.interval(parse_duration(value), timezone=zone)


def cadence_value(cadence: ScheduleCadence) -> str:
    """The ``value`` that :func:`parse_cadence` turns back into ``cadence``."""
    if cadence.kind == "cron":
        return str(cadence.expression)
    if cadence.kind == "once":
        return str(cadence.at)
    return str(cadence.every_secs)


def revise_cadence(
    current: ScheduleCadence,
    *,
    kind: str | None = None,
    value: str | None = None,
    timezone: str | None = None,
    now: TimeLike | None = None,
) -> ScheduleCadence | None:
    """``current`` with some of kind/value/timezone replaced, or ``None`` if none given.

    Changing only the zone keeps the expression (or, for a one-shot, the instant).
    Changing the kind requires a new value.
    """
    if kind is None and value is None and timezone is None:
        return None
    if kind is not None and kind != current.kind and value is None:
        raise InvalidInputError("changing the cadence type needs a new cadence value")
    return parse_cadence(
        kind or current.kind,
        value if value is not None else cadence_value(current),
        timezone or current.timezone,
        now=now,
    )


def format_in_timezone(utc_timestamp: TimeLike | None, cadence: ScheduleCadence) -> str | None:
    """``utc_timestamp`` on the cadence's wall clock, e.g. ``2026-03-09 02:30 EDT``."""
    if utc_timestamp is None:
        return None
    local = to_utc(utc_timestamp).astimezone(ZoneInfo(cadence.timezone))
    return f"{local:%Y-%m-%d %H:%M} {local.tzname()}"
