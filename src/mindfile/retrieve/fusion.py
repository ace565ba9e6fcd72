"""Fusing ranked lists: weighted min-max (the seed's default) and reciprocal rank fusion."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "RRF_K",
    "Fused",
    "add_tail",
    "min_max",
    "rank_key",
    "rrf_fusion",
    "weighted_fusion",
]

RRF_K = 60


@dataclass(slots=True)
class Fused:
    """A candidate's per-leg raw scores, normalised contributions and fused score."""

    rowid: int
    vector: float | None = None
    fts: float | None = None
    vector_rank: int | None = None
    fts_rank: int | None = None
    vector_norm: float = 0.0
    fts_norm: float = 0.0
    score: float = 0.0
    #: The time boost included in ``score`` (None: the query named no time).
    time: float | None = None
    #: The preference boost included in ``score`` (None: no recommendation intent).
    preference: float | None = None


def min_max(scores: Sequence[float]) -> list[float]:
    """Scale to [0, 1]; a list whose scores are all equal maps to 1.0."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi - lo <= 1e-12:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def _collect(
    vector: Sequence[tuple[int, float]], fts: Sequence[tuple[int, float]]
) -> dict[int, Fused]:
    out: dict[int, Fused] = {}
    for rank, (rowid, score) in enumerate(vector, start=1):
        out.setdefault(rowid, Fused(rowid)).vector = score
        out[rowid].vector_rank = rank
    for rank, (rowid, score) in enumerate(fts, start=1):
        out.setdefault(rowid, Fused(rowid)).fts = score
        out[rowid].fts_rank = rank
    return out


def weighted_fusion(
    vector: Sequence[tuple[int, float]],
    fts: Sequence[tuple[int, float]],
    vector_weight: float,
    fts_weight: float,
) -> dict[int, Fused]:
    """``vector_weight * minmax(vector) + fts_weight * minmax(fts)`` (absent leg = 0)."""
    out = _collect(vector, fts)
    for (rowid, _), norm in zip(vector, min_max([s for _, s in vector]), strict=True):
        out[rowid].vector_norm = norm
    for (rowid, _), norm in zip(fts, min_max([s for _, s in fts]), strict=True):
        out[rowid].fts_norm = norm
    for item in out.values():
        item.score = vector_weight * item.vector_norm + fts_weight * item.fts_norm
    return out


def rrf_fusion(
    vector: Sequence[tuple[int, float]],
    fts: Sequence[tuple[int, float]],
    vector_weight: float = 1.0,
    fts_weight: float = 1.0,
    k: int = RRF_K,
) -> dict[int, Fused]:
    """``sum(weight / (k + rank))`` over the lists a candidate appears in (ranks from 1)."""
    out = _collect(vector, fts)
    for item in out.values():
        if item.vector_rank is not None:
            item.vector_norm = vector_weight / (k + item.vector_rank)
        if item.fts_rank is not None:
            item.fts_norm = fts_weight / (k + item.fts_rank)
        item.score = item.vector_norm + item.fts_norm
    return out


def add_tail(
    fused: dict[int, Fused],
    vector: Sequence[tuple[int, float]],
    fts: Sequence[tuple[int, float]],
    *,
    start: int,
) -> None:
    """Add hits from below the legs' fused depth: score 0, ranked after the fused ones.

    ``vector``/``fts`` continue the legs from rank ``start``. A hit already fused keeps
    its score and breakdown untouched, so going deeper never changes a fused result.
    """
    tail: dict[int, Fused] = {}
    for rank, (rowid, score) in enumerate(vector, start=start):
        if rowid not in fused:
            tail[rowid] = Fused(rowid, vector=score, vector_rank=rank)
    for rank, (rowid, score) in enumerate(fts, start=start):
        if rowid not in fused:
            item = tail.setdefault(rowid, Fused(rowid))
            item.fts, item.fts_rank = score, rank
    fused.update(tail)


def rank_key(item: Fused, sequence_end: int, depth: int) -> tuple[float, int, int, int]:
    """The order of results, deterministic and independent of how deep the legs were read.

    Fused score first; equal scores go to the most recent chunk (higher
    ``sequence_end``, then higher rowid). Hits from below every leg's fused ``depth``
    (score 0) come after all fused hits, by their best leg rank.
    """
    v, f = item.vector_rank, item.fts_rank  # no list or min(): ~300 calls a search
    if f is None:
        f = 1 << 30
    best = f if v is None or f < v else v
    # A preference-leg hit (no leg rank, but boosted: preference set) is fused, not tail.
    tail_rank = best if best > depth and item.preference is None else 0
    return (-item.score, tail_rank, -sequence_end, -item.rowid)
