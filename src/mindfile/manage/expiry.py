"""Expiry: TTLs, importance decay, what search must hide, and the sweep.

* A chunk is **expired** when ``expires_at <= now`` and it is not pinned. Search hides
  expired chunks at once (:func:`alive_clause`, :func:`hidden_rowids`); the sweep
  deletes them.
* **Decay** is configured per store (:func:`set_decay_policy`, kept in ``store_meta``
  so every process agrees): with a half-life, an unpinned chunk's effective importance
  is ``importance × 2^(−age / half_life)``, ``age`` counted from its last recorded use
  (else its creation). At sweep time, chunks whose effective importance is below the
  policy's ``floor`` are deleted as well. Decay never hides anything from search
  between sweeps.
* Only chunks that belong to events (messages, notes, summaries) are managed; fact
  chunks are derived from the ``facts`` table and follow the facts API.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from mindfile.errors import InvalidInputError
from mindfile.manage._delete import delete_chunks
from mindfile.manage.importance import effective_importance, iso, parse_time
from mindfile.manage.types import DecayPolicy, SweepResult
from mindfile.storage.db import Database

__all__ = [
    "alive_clause",
    "get_decay_policy",
    "hidden_rowids",
    "set_decay_policy",
    "sweep_expired",
]

HALF_LIFE_KEY = "decay_half_life_seconds"
FLOOR_KEY = "decay_floor"

#: Chunks search must not return: past their expiry and not pinned (partial index).
HIDDEN = "SELECT id FROM chunks WHERE expires_at <= ? AND pinned = 0"

LIVE_MANAGED = """
SELECT c.id, c.importance, coalesce(c.last_accessed_at, c.created_at)
FROM chunks AS c
WHERE c.pinned = 0 AND (c.expires_at IS NULL OR c.expires_at > ?)
  AND EXISTS (SELECT 1 FROM event_chunks AS l WHERE l.chunk_rowid = c.id)
"""

SET_META = "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)"


def alive_clause(now: str, alias: str = "c") -> tuple[str, list[Any]]:
    """SQL keeping only chunks that are not expired at ``now`` (pinned ones always are)."""
    sql = f" AND ({alias}.expires_at IS NULL OR {alias}.expires_at > ? OR {alias}.pinned = 1)"
    return sql, [now]


def hidden_rowids(db: Database, now: str) -> set[int]:
    """Rowids of expired chunks at ``now``: usually none, found through a partial index."""
    return {int(r[0]) for r in db.query(HIDDEN, (now,))}


def get_decay_policy(db: Database) -> DecayPolicy:
    """The store's decay policy (no decay unless one was set)."""
    meta: dict[str, str] = dict(
        db.query(
            "SELECT key, value FROM store_meta WHERE key IN (?, ?)", (HALF_LIFE_KEY, FLOOR_KEY)
        )
    )
    half_life = meta.get(HALF_LIFE_KEY)
    return DecayPolicy(
        half_life_seconds=None if half_life in (None, "") else float(half_life),
        floor=float(meta.get(FLOOR_KEY) or 0.0),
    )


def set_decay_policy(
    db: Database, half_life: float | timedelta | None, floor: float = 0.0
) -> DecayPolicy:
    """Store the decay policy: ``half_life`` (seconds or a timedelta; None = no decay)
    and the sweep's ``floor`` (0 = decay never deletes)."""
    seconds = half_life.total_seconds() if isinstance(half_life, timedelta) else half_life
    if seconds is not None and (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not 0 < seconds < 1e300  # NaN, infinities and ints too big for a float fail
    ):
        raise InvalidInputError("half_life must be positive seconds, a timedelta, or None")
    if (
        isinstance(floor, bool)
        or not isinstance(floor, int | float)
        or not 0.0 <= floor < 1.0  # also refuses NaN
    ):
        raise InvalidInputError("floor must be from 0 (no decay expiry) to below 1")
    policy = DecayPolicy(None if seconds is None else float(seconds), float(floor))
    with db.atomic():
        half = policy.half_life_seconds
        db.execute(SET_META, (HALF_LIFE_KEY, "" if half is None else repr(half)))
        db.execute(SET_META, (FLOOR_KEY, repr(policy.floor)))
    return policy


def decayed_below_floor(db: Database, now: datetime, policy: DecayPolicy) -> list[int]:
    """Unpinned, unexpired managed chunks whose effective importance is below the floor."""
    if policy.half_life_seconds is None or policy.floor <= 0:
        return []
    out = []
    for rowid, importance, last_used in db.query(LIVE_MANAGED, (iso(now),)):
        value = effective_importance(
            float(importance),
            last_used=str(last_used),
            now=now,
            half_life_seconds=policy.half_life_seconds,
        )
        if value < policy.floor:
            out.append(int(rowid))
    return out


def sweep_expired(db: Database, now: datetime | str | None = None) -> SweepResult:
    """Delete expired chunks and decayed-below-floor ones, and events left empty.

    One transaction; pinned chunks are never touched.
    """
    moment = parse_time(now)
    stamp = iso(moment)
    with db.atomic():
        expired = sorted(hidden_rowids(db, stamp))
        decayed = decayed_below_floor(db, moment, get_decay_policy(db))
        deleted = delete_chunks(db, expired + decayed)
    return SweepResult(
        expired_chunks=len(expired),
        decayed_chunks=len(decayed),
        deleted_events=deleted.events,
        deleted_notes=deleted.notes,
        now=stamp,
    )
