"""Rerank memory candidates: similarity, recency and importance, with near-duplicates out.

``final = w_s * similarity + w_r * recency + w_i * importance`` where

- ``similarity`` is the cosine between the query and the chunk (clipped below at 0),
  or, for a candidate with a ``relevance`` (the hybrid leg's fused vector + BM25 score,
  what ``search`` ranks by), that relevance,
- ``recency`` is ``0.5 ** (age / half_life)`` from the chunk's ``created_at``
  (1.0 for a chunk written now, 0.5 one half-life ago; future timestamps count as now),
- ``importance`` is the chunk's importance in [0, 1], or 1.0 when it is pinned.

Candidates are then walked best first; one whose content hash equals a kept one's, or
whose vector's cosine with a kept one's is at or above ``near_duplicate``, is removed in
favour of the higher-ranked. Everything here is pure: no I/O, the clock is a parameter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from mindfile.context.types import RerankWeights
from mindfile.errors import InvalidInputError

__all__ = ["Candidate", "Ranked", "Reranked", "recency_score", "rerank"]

Leg = Literal["relevance", "salience", "lexical", "hybrid"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A chunk offered to the reranker.

    ``legs`` says which retrieval legs found it; ``vector`` (L2-normalised) is only
    used for near-duplicate removal and may be None. ``relevance``, when set, is the
    candidate's fused hybrid score (vector and BM25, in [0, 1], as ``search`` ranks) and
    takes the place of the cosine in the first term. ``occurred_at`` is when it happened
    (None: when it was stored, ``created_at``); it dates and orders the memory in the
    context, while recency stays on ``created_at``.
    """

    chunk_id: str
    session_id: str
    text: str
    similarity: float
    created_at: datetime
    importance: float = 0.5
    pinned: bool = False
    content_hash: str | None = None
    legs: frozenset[Leg] = frozenset({"relevance"})
    sequence_end: int | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    vector: npt.NDArray[np.float32] | None = field(default=None, compare=False, repr=False)
    relevance: float | None = None
    occurred_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the fields (without the vector)."""
        return {
            "chunk_id": self.chunk_id,
            "session_id": self.session_id,
            "text": self.text,
            "similarity": self.similarity,
            "created_at": self.created_at.isoformat(),
            "importance": self.importance,
            "pinned": self.pinned,
            "content_hash": self.content_hash,
            "legs": sorted(self.legs),
            "sequence_end": self.sequence_end,
            "metadata": dict(self.metadata),
            "relevance": self.relevance,
            "occurred_at": None if self.occurred_at is None else self.occurred_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class Ranked:
    """A candidate with its terms and final score; ``explain`` has all of them."""

    candidate: Candidate
    score: float
    similarity: float
    recency: float
    importance: float
    explain: Mapping[str, Any]

    @property
    def formula(self) -> str:
        """``final 0.62 = 0.70×0.71 + 0.20×0.40 + 0.10×0.50``."""
        w = self.explain["weights"]
        first = self.explain.get("relevance")
        first_text = f"{self.similarity:.2f}" if first is None else f"relevance {float(first):.2f}"
        return (
            f"final {self.score:.2f} = {w['similarity']:.2f}×{first_text}"
            f" + {w['recency']:.2f}×{self.recency:.2f}"
            f" + {w['importance']:.2f}×{self.importance:.2f}"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict: the candidate, the score and the explanation."""
        return {
            "candidate": self.candidate.to_dict(),
            "score": self.score,
            "explain": dict(self.explain),
        }


@dataclass(frozen=True, slots=True)
class Reranked:
    """``kept`` best first; ``duplicates`` as ``(removed, kept chunk_id, why)``."""

    kept: tuple[Ranked, ...]
    duplicates: tuple[tuple[Ranked, str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return {
            "kept": [r.to_dict() for r in self.kept],
            "duplicates": [
                {"removed": r.to_dict(), "duplicate_of": of, "why": why}
                for r, of, why in self.duplicates
            ],
        }


def recency_score(created_at: datetime, now: datetime, half_life: timedelta) -> float:
    """``0.5 ** (age / half_life)``; a timestamp in the future counts as age 0."""
    if half_life <= timedelta(0):
        raise InvalidInputError("half_life must be positive")
    age = max((now - created_at).total_seconds(), 0.0)
    return float(0.5 ** (age / half_life.total_seconds()))


def rerank(
    candidates: Sequence[Candidate],
    *,
    now: datetime,
    weights: RerankWeights | None = None,
    half_life: timedelta = timedelta(days=7),
    near_duplicate: float | None = 0.95,
) -> Reranked:
    """Score, sort (best first) and de-duplicate ``candidates``.

    Ties on the final score go to the higher similarity, then the newer chunk, then the
    chunk id (so the order is total and deterministic). ``near_duplicate=None`` turns
    the vector check off (equal content hashes are still duplicates).
    """
    w = weights or RerankWeights()
    for c in candidates:
        if (c.created_at.tzinfo is None) != (now.tzinfo is None):
            raise InvalidInputError(
                "created_at and now must both be timezone-aware (or both naive)"
            )
    ranked = [_score(c, now, w, half_life) for c in candidates]
    ranked.sort(key=_order)
    kept: list[Ranked] = []
    dups: list[tuple[Ranked, str, str]] = []
    seen_ids: set[str] = set()
    seen = _Seen(len(ranked))
    for item in ranked:
        cand = item.candidate
        if cand.chunk_id in seen_ids:
            continue  # the same chunk offered twice: the better-scored copy is kept
        why = seen.duplicate_of(cand, near_duplicate)
        if why is not None:
            dups.append((item, why[0], why[1]))
            continue
        seen_ids.add(cand.chunk_id)
        seen.add(cand)
        kept.append(item)
    return Reranked(tuple(kept), tuple(dups))


def _order(r: Ranked) -> tuple[float, float, float, str]:
    return (-r.score, -r.similarity, -r.candidate.created_at.timestamp(), r.candidate.chunk_id)


def _score(c: Candidate, now: datetime, w: RerankWeights, half_life: timedelta) -> Ranked:
    sim = max(float(c.similarity), 0.0)
    rel = None if c.relevance is None else min(max(float(c.relevance), 0.0), 1.0)
    rec = recency_score(c.created_at, now, half_life)
    imp = 1.0 if c.pinned else min(max(float(c.importance), 0.0), 1.0)
    terms = {
        "similarity": w.similarity * (sim if rel is None else rel),
        "recency": w.recency * rec,
        "importance": w.importance * imp,
    }
    final = terms["similarity"] + terms["recency"] + terms["importance"]
    explain = {
        "similarity": sim,
        "relevance": rel,
        "recency": rec,
        "importance": imp,
        "pinned": c.pinned,
        "age_days": max((now - c.created_at).total_seconds(), 0.0) / 86400.0,
        "half_life_days": half_life.total_seconds() / 86400.0,
        "weights": w.to_dict(),
        "terms": terms,
        "final": final,
        "legs": sorted(c.legs),
    }
    return Ranked(c, final, sim, rec, imp, explain)


class _Seen:
    """The kept candidates' content hashes and vectors, for the duplicate checks: one
    matrix product per candidate instead of a dot product per kept pair."""

    def __init__(self, capacity: int) -> None:
        self._hashes: dict[str, str] = {}
        self._ids: list[str] = []
        self._matrix: npt.NDArray[np.float32] | None = None
        self._n = 0
        self._capacity = max(capacity, 1)

    def add(self, cand: Candidate) -> None:
        if cand.content_hash is not None:
            self._hashes.setdefault(cand.content_hash, cand.chunk_id)
        if cand.vector is None:
            return
        if self._matrix is None:
            self._matrix = np.empty((self._capacity, len(cand.vector)), dtype=np.float32)
        if len(cand.vector) != self._matrix.shape[1]:
            return
        self._matrix[self._n] = cand.vector
        self._ids.append(cand.chunk_id)
        self._n += 1

    def duplicate_of(self, cand: Candidate, threshold: float | None) -> tuple[str, str] | None:
        if cand.content_hash is not None and cand.content_hash in self._hashes:
            prev = self._hashes[cand.content_hash]
            return prev, f"same content as {prev}"
        if threshold is None or cand.vector is None or self._matrix is None or not self._n:
            return None
        if len(cand.vector) != self._matrix.shape[1]:
            return None
        cosines = self._matrix[: self._n] @ cand.vector
        hits = np.flatnonzero(cosines >= threshold)
        if not len(hits):
            return None
        first = int(hits[0])  # the best-ranked kept one, as the pairwise walk found
        prev, cos = self._ids[first], float(cosines[first])
        return prev, f"near-duplicate of {prev} (cosine {cos:.3f} ≥ {threshold:.2f})"
