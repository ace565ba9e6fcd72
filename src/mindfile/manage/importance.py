"""Importance and time rules as pure functions (no I/O): the formulas, in one place.

* **Role defaults** at write time: ``user`` 0.5, ``assistant`` 0.5, ``tool`` 0.3,
  ``system`` 0.1 (the seed's table), with ``function`` as ``tool`` and ``developer`` as
  ``system``; anything without a known role (plain strings, notes) gets 0.5.
* **Explicit** values are floats in [0, 1] (:func:`check_importance`).
* **Use boost**: each recorded use moves importance 5 % of the way to 1:
  ``i' = i + 0.05 × (1 − i)`` — bounded, and diminishing near the top.
* **Decay** (off unless a half-life is configured): the *effective* importance halves
  every ``half_life`` since the item was last used (or created):
  ``e = i × 2^(−age / half_life)``. A pinned item's effective importance is always 1.

This module imports nothing from the rest of Mindfile but errors, so the write path
(:mod:`mindfile.index.pipeline`) can use it without import cycles.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from mindfile.errors import InvalidInputError

__all__ = [
    "DEFAULT_IMPORTANCE",
    "MAX_TTL_SECONDS",
    "ROLE_IMPORTANCE",
    "USE_BOOST",
    "boosted",
    "check_importance",
    "check_ttl",
    "decayed",
    "effective_importance",
    "expires_at",
    "iso",
    "parse_time",
    "role_importance",
]

DEFAULT_IMPORTANCE = 0.5

#: The seed's role defaults, plus the aliases current chat APIs use for the same roles.
ROLE_IMPORTANCE: Mapping[str, float] = {
    "user": 0.5,
    "assistant": 0.5,
    "tool": 0.3,
    "function": 0.3,
    "system": 0.1,
    "developer": 0.1,
}

#: Fraction of the remaining distance to 1 that one recorded use adds.
USE_BOOST = 0.05

#: A TTL longer than this (about 1,000 years) is refused rather than overflowing dates.
MAX_TTL_SECONDS = 1000 * 365.25 * 86400


def role_importance(role: str | None) -> float:
    """The write-time default for a message with ``role`` (case-insensitive)."""
    if role is None:
        return DEFAULT_IMPORTANCE
    return ROLE_IMPORTANCE.get(role.strip().lower(), DEFAULT_IMPORTANCE)


def check_importance(value: Any, what: str = "importance") -> float:
    """``value`` as a float in [0, 1], or :class:`InvalidInputError`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(f"{what} must be a number from 0 to 1, not {value!r}")
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise InvalidInputError(f"{what} must be from 0 to 1, not {value!r}")
    return number


def check_ttl(value: Any) -> float:
    """A time-to-live (seconds as a number, or a ``timedelta``) as positive seconds."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(f"ttl must be seconds or a timedelta, not {value!r}")
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidInputError(f"ttl must be positive, not {value!r}")
    if seconds > MAX_TTL_SECONDS:
        raise InvalidInputError("ttl must be at most 1000 years (use None for no expiry)")
    return seconds


def parse_time(value: datetime | str | None, what: str = "now") -> datetime:
    """An aware UTC datetime from ``value`` (None = the current time).

    Strings are ISO-8601; naive datetimes and strings are taken as UTC.
    """
    if value is None:
        return datetime.now(UTC)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as exc:
            raise InvalidInputError(f"{what} is not an ISO-8601 time: {value!r}") from exc
    if not isinstance(value, datetime):
        raise InvalidInputError(f"{what} must be a datetime, an ISO-8601 string or None")
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def iso(moment: datetime) -> str:
    """The stored form of a time: ISO-8601 UTC with microseconds (sortable as text)."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def expires_at(ttl: float | timedelta | None, now: datetime | str | None = None) -> str | None:
    """The ``expires_at`` text for a TTL given at ``now`` (None when there is no TTL)."""
    if ttl is None:
        return None
    return iso(parse_time(now) + timedelta(seconds=check_ttl(ttl)))


def boosted(importance: float) -> float:
    """Importance after one recorded use: ``i + USE_BOOST × (1 − i)``."""
    return importance + USE_BOOST * (1.0 - importance)


def decayed(importance: float, age_seconds: float, half_life_seconds: float | None) -> float:
    """``importance × 2^(−age / half_life)``; unchanged without a half-life."""
    if half_life_seconds is None or age_seconds <= 0:
        return importance
    return importance * math.pow(2.0, -age_seconds / half_life_seconds)


def effective_importance(
    importance: float,
    *,
    pinned: bool = False,
    last_used: datetime | str | None = None,
    now: datetime | str | None = None,
    half_life_seconds: float | None = None,
) -> float:
    """What salience, rerank, expiry and quotas compare: 1.0 when pinned, else decayed.

    ``last_used`` is the chunk's ``last_accessed_at`` or, if never used, its
    ``created_at``; without it (or a half-life) the stored importance is returned.
    """
    if pinned:
        return 1.0
    if half_life_seconds is None or last_used is None:
        return importance
    age = (parse_time(now) - parse_time(last_used, "last_used")).total_seconds()
    return decayed(importance, age, half_life_seconds)
