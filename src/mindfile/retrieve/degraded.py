"""Search while vectors are missing: never lose a hit, and say so in ``degraded``.

Two situations (docs/background-indexing.md):

* **The query cannot be embedded** (the embedder is down): hybrid search runs the
  full-text leg only and ranks it by
  ``(1 - RECENCY_WEIGHT) * fts_norm + RECENCY_WEIGHT * recency``, where ``fts_norm`` is
  the min-max normalised BM25 score and ``recency`` goes linearly from 1 (the newest
  candidate) to 0 (the oldest), newest meaning the highest chunk id (ids only grow).
  Without meaning to break ties, recent memory is the better bet.
* **Some chunks have no vector yet** (jobs pending, running or dead-lettered): hybrid
  search still runs both legs; a full-text candidate that has no vector is scored on
  its full-text leg alone with the weights renormalised (``(vector_weight +
  fts_weight) * fts_norm``, or the RRF equivalent), so it competes with embedded chunks
  instead of forfeiting the vector share of its score.

Either way ``SearchResults.degraded`` explains it. The check that keeps the common
path fast is one indexed ``EXISTS`` on the job queue (:mod:`mindfile.storage.search`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mindfile.retrieve.fusion import Fused, weighted_fusion
from mindfile.storage.backend import AnyDatabase, search_store

if TYPE_CHECKING:
    from mindfile.retrieve.search import SearchRequest

__all__ = ["RECENCY_WEIGHT", "backlog_note", "degrade", "lift_unembedded", "recency_fusion"]

RECENCY_WEIGHT = 0.2

#: Counts stop here ("1000+"): a search must not scan a bulk import's whole backlog.
BACKLOG_COUNT_CAP = 1000


def backlog_note(db: AnyDatabase) -> str | None:
    """Why some chunks are findable by full text only, or None when every job is done."""
    counts = search_store(db).backlog(BACKLOG_COUNT_CAP)
    if counts is None:
        return None
    pending, running, failed = counts
    total = pending + running + failed
    if not total:  # finished between the two statements
        return None
    cap = BACKLOG_COUNT_CAP
    queued, queued_capped = pending + running, cap in (pending, running)
    parts = [_count(queued, queued_capped) + " queued"] if queued else []
    if failed:
        parts.append(_count(failed, failed == cap) + " failed")
    noun = "chunk awaiting its embedding" if total == 1 else "chunks awaiting embeddings"
    head = _count(total, queued_capped or failed == cap)
    return f"{head} {noun} ({', '.join(parts)}); such chunks are matched by full text only"


def _count(n: int, at_least: bool) -> str:
    return f"{n}+" if at_least else str(n)


def recency_fusion(
    fts_hits: list[tuple[int, float]], weight: float = RECENCY_WEIGHT
) -> dict[int, Fused]:
    """Full-text hits fused with recency (see the module docstring)."""
    fused = weighted_fusion([], fts_hits, 1.0, 1.0)
    newest_first = sorted(fused, reverse=True)
    last = max(len(newest_first) - 1, 1)
    for rank, rowid in enumerate(newest_first):
        item = fused[rowid]
        item.score = (1.0 - weight) * item.fts_norm + weight * (1.0 - rank / last)
    return fused


def lift_unembedded(db: AnyDatabase, fused: dict[int, Fused], req: SearchRequest) -> int:
    """Rescore full-text candidates that have no vector on their full-text leg alone."""
    candidates = [r for r, f in fused.items() if f.vector is None and f.fts is not None]
    if not candidates or req.fts_weight <= 0:
        return 0
    total = req.vector_weight + req.fts_weight
    rows = search_store(db).unembedded_among(candidates)
    for rowid in rows:
        item = fused[rowid]
        if req.fusion == "rrf":  # fts_norm is already fts_weight / (k + rank)
            item.score = item.fts_norm * total / req.fts_weight
        else:
            item.score = total * item.fts_norm
    return len(rows)


def degrade(
    db: AnyDatabase,
    fused: dict[int, Fused],
    fts_hits: list[tuple[int, float]],
    req: SearchRequest,
    *,
    mode: str,
    degraded: str | None,
) -> tuple[dict[int, Fused], str | None]:
    """Apply both rules to a fused candidate set; returns it and the ``degraded`` note."""
    if req.mode == "fts":  # full text was asked for: nothing is missing
        return fused, degraded
    if degraded is not None and mode == "fts":
        fused = recency_fusion(fts_hits)
    note = backlog_note(db)
    if note is None:
        return fused, degraded
    if mode == "hybrid":
        lift_unembedded(db, fused, req)
    return fused, note if degraded is None else f"{degraded}; {note}"
