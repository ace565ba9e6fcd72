"""Memory-management value types: frozen, row-major dataclasses with ``to_dict()``."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = [
    "ConsolidationRecord",
    "ConsolidationReport",
    "DecayPolicy",
    "Quota",
    "QuotaPolicy",
    "QuotaUsage",
    "SweepResult",
]

#: What a write that would go over a quota does: evict old items, or fail.
QuotaPolicy = Literal["evict", "fail"]


class _ToDict:
    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the fields."""
        return asdict(self)  # type: ignore[call-overload,no-any-return]


@dataclass(frozen=True, slots=True)
class DecayPolicy(_ToDict):
    """Importance decay for a store (see :mod:`mindfile.manage.importance`).

    ``half_life_seconds`` None means no decay. ``floor``: at sweep time, unpinned items
    whose decayed importance is below it are deleted (0 disables that).
    """

    half_life_seconds: float | None = None
    floor: float = 0.0


@dataclass(frozen=True, slots=True)
class SweepResult(_ToDict):
    """What :meth:`mindfile.Mindfile.sweep_expired` removed.

    ``expired_chunks`` were past their ``expires_at``; ``decayed_chunks`` had decayed
    below the floor; ``deleted_events`` lost their last chunk and went with them (of
    which ``deleted_notes`` were notes). ``now`` is the time the sweep used.
    """

    expired_chunks: int
    decayed_chunks: int
    deleted_events: int
    deleted_notes: int
    now: str


@dataclass(frozen=True, slots=True)
class Quota(_ToDict):
    """A scope's limits. ``None`` limits are unlimited.

    ``evicted_items`` and ``evicted_bytes`` count everything evicted under this quota
    so far.
    """

    scope: str
    max_items: int | None
    max_bytes: int | None
    policy: QuotaPolicy
    evicted_items: int = 0
    evicted_bytes: int = 0
    created_at: str = ""
    updated_at: str = ""


@dataclass(frozen=True, slots=True)
class QuotaUsage(_ToDict):
    """A scope's current usage (expired-but-unswept items included) and its quota."""

    scope: str
    items: int
    bytes: int
    expired_items: int
    quota: Quota | None = None


@dataclass(frozen=True, slots=True)
class ConsolidationRecord(_ToDict):
    """One consolidation step, for provenance.

    ``kind`` ``"merge"``: ``chunk_id`` is the surviving chunk and ``sources`` the
    near-duplicates folded into it (``chunk_id``, ``text``, ``sequence_start``,
    ``sequence_end``, ``importance``). ``"summary"``: ``chunk_id`` is a summary chunk
    and ``sources`` the summarized events (``sequence``).
    """

    kind: Literal["merge", "summary"]
    session_id: str
    chunk_id: str
    sequence_start: int
    sequence_end: int
    sources: tuple[dict[str, Any], ...]
    created_at: str


@dataclass(frozen=True, slots=True)
class ConsolidationReport(_ToDict):
    """What :meth:`mindfile.Mindfile.consolidate` did (all zero when there was nothing to do).

    ``merged_groups`` near-duplicate groups folded ``merged_chunks`` chunks into their
    survivors; ``summaries`` spans were condensed into ``summary_chunks`` chunks covering
    ``summarized_events`` events (``dropped_chunks`` originals deleted with
    ``drop_originals=True``). ``skipped`` counts groups and spans left alone because
    another writer changed them between planning and writing (run again to retry).
    """

    sessions: int
    merged_groups: int
    merged_chunks: int
    summaries: int
    summary_chunks: int
    summarized_events: int
    dropped_chunks: int
    now: str
    skipped: int = 0
