"""Turn one conversation event into the rows the write path stores (pure, no I/O)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from mindfile.errors import InvalidInputError, InvalidTimeError, LimitExceededError
from mindfile.index.chunking import ChunkSpec, chunk_text, content_hash
from mindfile.index.extract import extract_author, extract_role, extract_text
from mindfile.index.statements import is_user_statement
from mindfile.manage.importance import DEFAULT_IMPORTANCE, check_importance, role_importance

__all__ = [
    "MAX_DEPTH",
    "MAX_ID_CHARS",
    "MAX_PAYLOAD_BYTES",
    "PreparedChunk",
    "PreparedEvent",
    "check_id",
    "check_time",
    "dump_json",
    "normalize_tags",
    "prepare_event",
    "stored_time",
]

MAX_ID_CHARS = 512
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
MAX_TAGS = 16
MAX_TAG_CHARS = 64
MAX_DEPTH = 100


@dataclass(frozen=True, slots=True)
class PreparedChunk:
    text: str
    content_hash: str
    metadata_json: str
    #: A user-side statement about the user (``chunks.user_statement``, migration 0014);
    #: None: not classified (the backfill classifies it, off the write path: a bulk
    #: ``store_many`` of ~1 KB chat chunks lost ~14% of its throughput classifying them;
    #: one ``store`` classifies its event, ~0.1 ms, so a conversation never waits for it).
    user_statement: bool | None = None


@dataclass(frozen=True, slots=True)
class PreparedEvent:
    session_id: str
    sequence: int
    payload_json: str
    chunks: tuple[PreparedChunk, ...]
    # Memory management (docs/memory-management.md): every chunk of the event starts
    # with this importance and expiry (ISO-8601 UTC text, None = never).
    importance: float = DEFAULT_IMPORTANCE
    expires_at: str | None = None
    # When it happened (ISO-8601 UTC text; None = when it is stored). Migration 0013.
    occurred_at: str | None = None


def check_id(value: Any, what: str) -> str:
    """A non-empty identifier string of at most ``MAX_ID_CHARS`` characters."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise InvalidInputError(f"{what} must not be empty")
    if len(value) > MAX_ID_CHARS:
        raise InvalidInputError(f"{what} is longer than {MAX_ID_CHARS} characters")
    if "\x00" in value:
        raise InvalidInputError(f"{what} must not contain NUL characters")
    _check_unicode(value, what)
    return value


def check_time(value: Any, what: str) -> datetime:
    """An aware UTC datetime from a datetime, a date (its midnight UTC), an ISO-8601
    string or epoch seconds; naive datetimes and strings without an offset are UTC.
    Anything else is an :class:`InvalidTimeError` (code ``invalid_time``)."""
    moment: datetime
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError as exc:
            raise InvalidTimeError(
                f"{what} must be an ISO-8601 time, not {value[:40]!r}", what=what
            ) from exc
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            moment = datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise InvalidTimeError(f"{what} is out of range: {value!r}", what=what) from exc
    else:
        raise InvalidTimeError(
            f"{what} must be a datetime, a date, an ISO-8601 string or epoch seconds, "
            f"not {type(value).__name__}",
            what=what,
        )
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except (OverflowError, ValueError) as exc:  # year 1 or 9999 shifted out of range
        raise InvalidTimeError(f"{what} is out of range", what=what) from exc


def stored_time(value: Any, what: str) -> str | None:
    """:func:`check_time` in the stored form (ISO-8601 UTC, microseconds); None stays."""
    if value is None:
        return None
    return check_time(value, what).isoformat(timespec="microseconds")


def _check_unicode(value: str, what: str) -> None:
    """SQLite stores UTF-8: a lone surrogate cannot be bound as a parameter."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{what} contains invalid unicode (lone surrogates)") from exc


def _check_depth(value: Any, what: str) -> None:
    """Refuse nesting deeper than ``MAX_DEPTH`` without recursing, so a hostile payload
    can neither blow the stack here nor be stored and then fail every later read."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > MAX_DEPTH:
            raise LimitExceededError(f"{what} is nested deeper than {MAX_DEPTH} levels")
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list | tuple))


def dump_json(value: Any, what: str) -> str:
    """Strict JSON text (no NaN/Infinity) or an :class:`InvalidInputError`."""
    if isinstance(value, dict | list | tuple):
        _check_depth(value, what)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{what} is not JSON-serialisable: {exc}") from exc
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{what} contains invalid unicode (lone surrogates)") from exc
    return text


def normalize_tags(tags: Sequence[str] | None, *, strict: bool = True) -> list[str]:
    """Trim, lowercase, de-duplicate; at most 16 tags of at most 64 characters.

    With ``strict`` (writes) an over-limit list is an error, so nothing is silently lost;
    without it (search filters) tags are only normalised.
    """
    if tags is None:
        return []
    if isinstance(tags, str | bytes | bytearray) or not isinstance(tags, Sequence):
        raise InvalidInputError("tags must be a list of strings")
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidInputError("tags must be strings")
        _check_unicode(tag, "tag")
        norm = " ".join(tag.split()).lower()
        if not norm or norm in out:
            continue
        if strict and len(norm) > MAX_TAG_CHARS:
            raise LimitExceededError(
                f"tag {norm[:20]!r}... is longer than {MAX_TAG_CHARS} characters"
            )
        out.append(norm)
    if strict and len(out) > MAX_TAGS:
        raise LimitExceededError(f"at most {MAX_TAGS} tags per item (got {len(out)})")
    return out


def prepare_event(
    session_id: str,
    sequence: int,
    payload: Any,
    *,
    metadata: Mapping[str, Any] | None = None,
    tags: Sequence[str] | None = None,
    spec: ChunkSpec = ChunkSpec(),
    importance: float | None = None,
    expires_at: str | None = None,
    occurred_at: Any = None,
    classify: bool = False,
) -> PreparedEvent:
    """Validate an event and compute its chunks (text, hash, metadata; with
    ``classify``, whether each is a user statement: ``store`` classifies its one event
    here, ``store_many`` leaves its chunks to the backfill, see PreparedChunk).

    ``importance`` (in [0, 1]) defaults to the role's (see :mod:`mindfile.manage.importance`).
    ``occurred_at``: when it happened (:func:`check_time`; None = when it is stored).
    """
    when = stored_time(occurred_at, "occurred_at")
    check_id(session_id, "session_id")
    if isinstance(sequence, bool) or not isinstance(sequence, int):
        raise InvalidInputError(f"sequence must be an integer, not {type(sequence).__name__}")
    if not 0 <= sequence < 2**63:
        raise InvalidInputError("sequence must be between 0 and 2**63 - 1")
    if isinstance(payload, float) and not math.isfinite(payload):
        raise InvalidInputError("payload must be finite")
    payload_json = dump_json(payload, "payload")
    if len(payload_json) > MAX_PAYLOAD_BYTES:
        raise LimitExceededError(f"payload is larger than {MAX_PAYLOAD_BYTES} bytes")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidInputError("metadata must be a mapping")
    meta: dict[str, Any] = dict(metadata or {})
    role = extract_role(payload)
    if role is not None:
        meta.setdefault("role", role)
    author = extract_author(payload)  # author match (mindfile.retrieve.authors)
    if author is not None:
        meta.setdefault("author", author)
    norm_tags = normalize_tags(tags if tags is not None else meta.get("tags"))
    if norm_tags:
        meta["tags"] = norm_tags
    else:
        meta.pop("tags", None)
    meta_json = dump_json(meta, "metadata")
    chunks = tuple(
        PreparedChunk(
            text,
            content_hash(text),
            meta_json,
            is_user_statement(text, meta_json) if classify else None,
        )
        for text in chunk_text(extract_text(payload), spec)
    )
    role_meta = meta.get("role")
    weight = (
        role_importance(role_meta if isinstance(role_meta, str) else None)
        if importance is None
        else check_importance(importance)
    )
    return PreparedEvent(session_id, sequence, payload_json, chunks, weight, expires_at, when)
