"""Timestamps: aware UTC datetimes inside, one fixed ISO-8601 text format on disk.

Every timestamp the scheduler stores is ``datetime.isoformat(timespec="microseconds")``
of an aware UTC datetime (``2026-11-21T18:00:00.000000+00:00``). One fixed width and
offset means text order is time order, so ``next_run_at <= :now`` works in SQL.
"""

from __future__ import annotations

from datetime import UTC, datetime

from mindfile.errors import InvalidInputError

__all__ = ["TimeLike", "iso", "iso_or_none", "now_utc", "to_utc"]

TimeLike = datetime | str


def now_utc() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC)


def to_utc(value: TimeLike, *, what: str = "timestamp") -> datetime:
    """An aware datetime or ISO-8601 string with an offset, as an aware UTC datetime.

    Naive values are rejected rather than guessed at: a wall-clock time without a zone
    names a different instant on every machine.
    """
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 64:  # no ISO-8601 timestamp is longer
            raise InvalidInputError(f"{what} is not an ISO-8601 timestamp: {value[:64]!r}...")
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError as exc:
            raise InvalidInputError(f"{what} is not an ISO-8601 timestamp: {value!r}") from exc
    elif isinstance(value, datetime):
        parsed = value
    else:
        raise InvalidInputError(f"{what} must be a datetime or an ISO-8601 string")
    try:
        offset = parsed.utcoffset()
    except (TypeError, ValueError) as exc:  # a broken tzinfo
        raise InvalidInputError(f"{what} has an unusable time zone: {exc}") from None
    if parsed.tzinfo is None or offset is None:
        raise InvalidInputError(f"{what} has no UTC offset (naive times are ambiguous): {value}")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # e.g. datetime.max at a negative offset
        raise InvalidInputError(f"{what} is out of range in UTC: {value}") from None


def iso(value: TimeLike, *, what: str = "timestamp") -> str:
    """The canonical stored text of a timestamp."""
    return to_utc(value, what=what).isoformat(timespec="microseconds")


def iso_or_none(value: TimeLike | None, *, what: str = "timestamp") -> str | None:
    """:func:`iso`, passing ``None`` through."""
    return None if value is None else iso(value, what=what)
