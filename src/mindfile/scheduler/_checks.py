"""Argument checks shared by the scheduler's types, rules and store.

Every public scheduler entry point validates what it is given with these, so a wrong
type, an integer beyond SQLite's 64 bits, a non-finite number or a string SQLite cannot
store (lone surrogates) is an :class:`~mindfile.errors.InvalidInputError` naming the
argument, never a bare ``AttributeError``/``TypeError``/``UnicodeEncodeError``.
"""

from __future__ import annotations

import math
from typing import Any

from mindfile.errors import InvalidInputError

__all__ = [
    "MAX_INT",
    "MAX_REF_CHARS",
    "check_int",
    "check_key",
    "check_ref",
    "check_seconds",
    "check_str",
    "optional_str",
]

#: SQLite's largest integer.
MAX_INT = 2**63 - 1

#: Ids and references (schedule, run, runner, channel ids): the core's id limit.
MAX_REF_CHARS = 512


def check_str(value: Any, what: str) -> str:
    """``value`` if it is a string SQLite can store (UTF-8: no lone surrogates)."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(f"{what} contains invalid unicode (lone surrogates)") from None
    return value


def optional_str(value: Any, what: str) -> str | None:
    """:func:`check_str`, passing ``None`` through."""
    return None if value is None else check_str(value, what)


def check_key(value: Any, what: str) -> str:
    """A string to look a row up by (an unknown one is simply not found)."""
    return check_str(value, what)


def check_ref(value: Any, what: str) -> str:
    """A new id or reference: non-empty, no NUL, at most ``MAX_REF_CHARS`` characters."""
    text = check_str(value, what)
    if not text.strip():
        raise InvalidInputError(f"{what} must not be empty")
    if "\x00" in text:
        raise InvalidInputError(f"{what} must not contain NUL characters")
    if len(text) > MAX_REF_CHARS:
        raise InvalidInputError(f"{what} is longer than {MAX_REF_CHARS} characters")
    return text


def check_int(value: Any, what: str, *, minimum: int = 0, maximum: int = MAX_INT) -> int:
    """An ``int`` (not a bool) in ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{what} must be an integer, not {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise InvalidInputError(f"{what} must be between {minimum} and {maximum}")
    return value


def check_seconds(value: Any, what: str, *, maximum: float) -> float:
    """A finite, positive number of seconds up to ``maximum``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(f"{what} must be a number of seconds")
    if not math.isfinite(value) or not 0 < value <= maximum:
        raise InvalidInputError(f"{what} must be positive and at most {maximum:g} seconds")
    return float(value)
