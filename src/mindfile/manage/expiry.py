"""Expiry: TTLs, importance decay, what search must hide, and the sweep.

* A chunk is **expired** when ``expires_at <= now`` and it is not pinned. Search hides
  expired chunks at once (:func:`alive_clause`, :func:`hidden_rowids`); the sweep
  deletes them. The rows are read and deleted through the lifecycle store
  (:mod:`mindfile.storage.lifecycle`), the policy kept through the meta store.
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
from typing import TYPE_CHECKING

from mindfile.errors import InvalidInputError
from mindfile.manage.importance import effective_importance, iso, parse_time
from mindfile.manage.types import DecayPolicy, SweepResult
from mindfile.storage.lifecycle import alive_clause

if TYPE_CHECKING:
    from mindfile._deps import StoreDeps
    from mindfile.storage.lifecycle import LifecycleStore
    from mindfile.storage.meta import MetaStore

__all__ = [
    "alive_clause",
    "decay_policy",
    "get_decay_policy",
    "hidden_rowids",
    "set_decay_policy",
    "sweep_expired",
]

HALF_LIFE_KEY = "decay_half_life_seconds"
FLOOR_KEY = "decay_floor"


def hidden_rowids(lifecycle: LifecycleStore, now: str) -> set[int]:
    """Rowids of expired chunks at ``now``: usually none, found through a partial index."""
    return lifecycle.hidden(now)


def decay_policy(meta: MetaStore) -> DecayPolicy:
    """The decay policy kept in ``meta`` (no decay unless one was set)."""
    values = meta.get_many((HALF_LIFE_KEY, FLOOR_KEY))
    half_life = values.get(HALF_LIFE_KEY)
    return DecayPolicy(
        half_life_seconds=None if half_life in (None, "") else float(half_life),
        floor=float(values.get(FLOOR_KEY) or 0.0),
    )


def get_decay_policy(engine: StoreDeps) -> DecayPolicy:
    """The store's decay policy (no decay unless one was set)."""
    return decay_policy(engine.stores.meta)


def set_decay_policy(
    engine: StoreDeps, half_life: float | timedelta | None, floor: float = 0.0
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
    half = policy.half_life_seconds
    engine.stores.meta.set(
        {HALF_LIFE_KEY: "" if half is None else repr(half), FLOOR_KEY: repr(policy.floor)}
    )
    return policy


def decayed_below_floor(lifecycle: LifecycleStore, now: datetime, policy: DecayPolicy) -> list[int]:
    """Unpinned, unexpired managed chunks whose effective importance is below the floor."""
    if policy.half_life_seconds is None or policy.floor <= 0:
        return []
    out = []
    for chunk in lifecycle.managed_live(iso(now)):
        value = effective_importance(
            chunk.importance,
            last_used=chunk.last_used,
            now=now,
            half_life_seconds=policy.half_life_seconds,
        )
        if value < policy.floor:
            out.append(chunk.rowid)
    return out


def sweep_expired(engine: StoreDeps, now: datetime | str | None = None) -> SweepResult:
    """Delete expired chunks and decayed-below-floor ones, and events left empty.

    One transaction; pinned chunks are never touched.
    """
    moment = parse_time(now)
    stamp = iso(moment)
    lifecycle = engine.stores.lifecycle
    with engine.db.atomic():
        expired = sorted(lifecycle.hidden(stamp))
        decayed = decayed_below_floor(lifecycle, moment, get_decay_policy(engine))
        deleted = lifecycle.delete_chunks(expired + decayed)
    return SweepResult(
        expired_chunks=len(expired),
        decayed_chunks=len(decayed),
        deleted_events=deleted.events,
        deleted_notes=deleted.notes,
        now=stamp,
    )
