"""Time-aware ranking: a soft boost toward the time a query names (docs/retrieval.md).

A query's time expressions (:mod:`mindfile.retrieve.timeq`, resolved against the query
date ``as_of``) become windows and an order preference. Each fused candidate then gets

    time = top * (weight * closeness + order_weight * order)

added to its fused score, where ``top`` is the best fused score among the candidates (so
the boost has the same meaning for weighted and RRF fusion), ``closeness`` is 1 inside
a window and decays exponentially outside it (``exp(-distance / decay)``, with separate
decays before and after the window: people talk about an event after it happened, so a
memory stored a few days after the window is likelier to be about it than one stored
before), and ``order`` is the candidate's time min-max scaled over the candidates (1 =
newest for "latest", 1 = oldest for "first"). A memory's time is the ``occurred_at`` of
its event, else when it was stored.

It is a boost, never a filter: a wrong parse ("May" the name, a year in a title) can
only reorder, not remove, the right memory. Only fused candidates (each leg's best
``candidates``) are boosted, so ``search(q, top_k=a)`` stays a prefix of ``top_k=b``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mindfile.retrieve.fusion import Fused
from mindfile.storage.backend import AnyDatabase, search_store

if TYPE_CHECKING:
    from mindfile.retrieve.timeq import TimeQuery

__all__ = [
    "DEFAULT_TIME_CONFIG",
    "TimeConfig",
    "apply_time",
    "boost",
    "chunk_times",
    "describe",
    "time_query",
]


@dataclass(frozen=True, slots=True)
class TimeConfig:
    """The boost's parameters (chosen by cross-validation on LoCoMo; benchmarks/README.md)."""

    #: Boost of a memory inside a named window, as a share of the best fused score.
    weight: float = 0.4
    #: Decay (days) of the boost for memories before / after the window.
    decay_before_days: float = 3.0
    decay_after_days: float = 14.0
    #: Boost of the newest ("latest", "currently") or oldest ("first") candidate.
    order_weight: float = 0.05


DEFAULT_TIME_CONFIG = TimeConfig()


def time_query(query: str, as_of: datetime) -> TimeQuery | None:
    """The query's time expressions, or None. The parser is imported on first use."""
    from mindfile.retrieve.timeq import parse_time_query

    return parse_time_query(query, as_of)


def load_parser() -> None:
    """Import the time parser now (~15 ms of regular expressions, paid otherwise by the
    first search that looks for time expressions)."""
    import mindfile.retrieve.timeq  # noqa: F401


def chunk_times(db: AnyDatabase, rowids: list[int]) -> dict[int, float]:
    """Each chunk's time (``occurred_at``, else ``created_at``) as epoch seconds."""
    if not rowids:
        return {}
    out: dict[int, float] = {}
    for rowid, text in search_store(db).chunk_times(rowids):
        try:
            out[rowid] = datetime.fromisoformat(text).timestamp()
        except ValueError:
            continue
    return out


def _closeness(t: float, windows: list[tuple[float, float]], cfg: TimeConfig) -> float:
    best = 0.0
    for start, end in windows:
        if start <= t < end:
            return 1.0
        if t < start:
            c = math.exp(-(start - t) / 86400.0 / max(cfg.decay_before_days, 1e-9))
        else:
            c = math.exp(-(t - end) / 86400.0 / max(cfg.decay_after_days, 1e-9))
        best = max(best, c)
    return best


def apply_time(
    db: AnyDatabase, fused: dict[int, Fused], tq: TimeQuery, cfg: TimeConfig | None = None
) -> None:
    """Add each candidate's time boost to its score (``Fused.time``), in place
    (``cfg`` None: :data:`DEFAULT_TIME_CONFIG`, read at call time)."""
    if fused:
        boost(fused, chunk_times(db, sorted(fused)), tq, cfg or DEFAULT_TIME_CONFIG)


def boost(fused: dict[int, Fused], times: dict[int, float], tq: TimeQuery, cfg: TimeConfig) -> None:
    """:func:`apply_time` with the candidates' times (epoch seconds) given."""
    if not fused:
        return
    top = max((f.score for f in fused.values()), default=0.0)
    scale = top if top > 0 else 1.0
    windows = [(w.start.timestamp(), w.end.timestamp()) for w in tq.windows]
    lo = min(times.values(), default=0.0)
    span = max(times.values(), default=0.0) - lo
    for rowid, item in fused.items():
        t = times.get(rowid)
        if t is None:
            item.time = 0.0
            continue
        boost = cfg.weight * _closeness(t, windows, cfg) if windows else 0.0
        if tq.order is not None and span > 0:
            newer = (t - lo) / span
            boost += cfg.order_weight * (newer if tq.order == "latest" else 1.0 - newer)
        item.time = scale * boost
        item.score += item.time


def describe(tq: TimeQuery | None) -> dict[str, Any] | None:
    """What was understood, for ``SearchResults.time``."""
    if tq is None:
        return None
    return {
        "as_of": tq.as_of.isoformat(),
        "windows": [
            {"text": w.text, "start": w.start.isoformat(), "end": w.end.isoformat()}
            for w in tq.windows
        ],
        "order": tq.order,
    }
