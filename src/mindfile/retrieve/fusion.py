"""Fusing ranked lists: calibrated weighted fusion (the default), weighted min-max (the
seed's) and reciprocal rank fusion.

Both weighted fusions compute ``vector_weight * v + fts_weight * f`` from each leg's
normalised scores; they differ in the normalisation (docs/retrieval.md, "Fusion"):

- ``"weighted"`` (the seed's): min-max over the leg's candidates, so the best is 1 and
  the worst 0 however close their raw scores are;
- ``"calibrated"`` (the default): the cosine min-max scaled over a range of at least
  :attr:`Calibration.vector_width` (close cosines stay close), BM25 divided by the
  larger of its best score and :attr:`Calibration.fts_scale` (BM25 0 means no match;
  weak lexical evidence stays small). In a large store, whose legs spread wider than
  that, it is min-max; in a store of a few memories it keeps the absolute evidence.
  The scales are the embedder's (:func:`mindfile.embed.fusion_calibration`); an
  embedder that recommends none is fused with min-max.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "DEFAULT_CALIBRATION",
    "RRF_K",
    "Calibration",
    "Fused",
    "Normalizer",
    "add_tail",
    "floored_min_max",
    "min_max",
    "normalizers",
    "rank_key",
    "rrf_fusion",
    "scaled_to_best",
    "weighted_fusion",
]

RRF_K = 60

#: Scores of one leg (best first) to their normalised values, in the same order.
Normalizer = Callable[[Sequence[float]], list[float]]


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
    #: The neighbour lift included in ``score`` (None: smoothing did not run).
    neighbors: float | None = None
    #: The token-match lift included in ``score`` (None: token match did not run).
    token_match: float | None = None
    #: The feedback lift included in ``score`` (None: feedback did not run, or the hit
    #: is one of the first results it never changes).
    feedback: float | None = None
    #: The author-match lift included in ``score`` (None: it did not run, or the hit is
    #: one of the first results it never changes).
    author: float | None = None


def min_max(scores: Sequence[float]) -> list[float]:
    """Scale to [0, 1]; a list whose scores are all equal maps to 1.0."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi - lo <= 1e-12:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def floored_min_max(scores: Sequence[float], width: float) -> list[float]:
    """``(s - min) / max(max - min, width)``: min-max whose range is at least ``width``.

    The worst candidate gets 0; the best gets 1 only when the scores spread over at least
    ``width``, so two close scores stay close. ``width`` 0 is :func:`min_max`.
    """
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    span = max(hi - lo, width)
    if span <= 1e-12:
        return [1.0] * len(scores)
    return [(s - lo) / span for s in scores]


def scaled_to_best(scores: Sequence[float], scale: float) -> list[float]:
    """``s / max(best, scale)`` for non-negative scores (BM25): 0 stays 0 (no match), the
    best gets 1 only when it reaches ``scale``."""
    if not scores:
        return []
    top = max(max(scores), scale)
    if top <= 0.0:  # no scale and nothing matched: all equal, as min-max would say
        return [1.0] * len(scores)
    return [max(s, 0.0) / top for s in scores]


@dataclass(frozen=True, slots=True)
class Calibration:
    """The absolute scales of calibrated fusion (the defaults: the bundled model's,
    chosen on LoCoMo by cross-validation, docs/retrieval.md).

    ``vector_width``: the least cosine range the vector leg is scaled over.
    ``fts_scale``: the least BM25 score that counts as a full lexical match.
    """

    vector_width: float = 0.2
    fts_scale: float = 8.0

    def normalizers(self) -> tuple[Normalizer, Normalizer]:
        """The (vector, BM25) normalisations for :func:`weighted_fusion`."""
        width, scale = self.vector_width, self.fts_scale
        return (
            lambda scores: floored_min_max(scores, width),
            lambda scores: scaled_to_best(scores, scale),
        )


DEFAULT_CALIBRATION = Calibration()


def normalizers(
    fusion: str, calibration: Calibration | tuple[float, float] | None = DEFAULT_CALIBRATION
) -> tuple[Normalizer, Normalizer]:
    """Each leg's normalisation for a weighted ``fusion``: ``"weighted"``, the seed's
    min-max; ``"calibrated"`` with ``calibration`` (``(vector_width, fts_scale)``, the
    embedder's: :func:`mindfile.embed.fusion_calibration`), or min-max when it is None
    (an embedder whose cosine scale was never measured)."""
    if fusion == "weighted" or (fusion == "calibrated" and calibration is None):
        return min_max, min_max
    if fusion == "calibrated" and calibration is not None:
        if not isinstance(calibration, Calibration):
            calibration = Calibration(*calibration)
        return calibration.normalizers()
    raise ValueError(f"no normalisation for fusion {fusion!r}")


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
    *,
    norms: tuple[Normalizer, Normalizer] | None = None,
) -> dict[int, Fused]:
    """``vector_weight * minmax(vector) + fts_weight * minmax(fts)`` (absent leg = 0).

    ``norms`` replaces min-max with other normalisations (the vector leg's, BM25's),
    e.g. :func:`normalizers` ``("calibrated")``. Each sees exactly the leg's list, so
    the fused scores depend only on the candidates.
    """
    norm_v, norm_f = norms or (min_max, min_max)
    out = _collect(vector, fts)
    for (rowid, _), norm in zip(vector, norm_v([s for _, s in vector]), strict=True):
        out[rowid].vector_norm = norm
    for (rowid, _), norm in zip(fts, norm_f([s for _, s in fts]), strict=True):
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
