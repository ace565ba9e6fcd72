"""BM25 scoring shared by every part of the index (:mod:`mindfile.retrieve.lexical`):
FTS5's ``bm25()`` contribution of a term, a search filter over one part's documents,
and the top k of one part's scores."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from mindfile._topk import top_positions
from mindfile.vector.base import VectorFilter

__all__ = ["IDF_FLOOR", "K1", "B", "Mask", "contribution", "doc_mask", "live_allowed", "top_k"]

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6


def contribution(
    idf: float,
    freq: npt.NDArray[np.float64],
    lengths: npt.NDArray[np.float32],
    avgdl: float,
) -> npt.NDArray[np.float64]:
    """One term's BM25 contribution per posting (FTS5's formula); every path scores
    with this one expression, so pruned and exhaustive scores are the same floats."""
    norm = K1 * (1.0 - B + B * lengths / avgdl)
    return idf * freq * (K1 + 1.0) / (freq + norm)


#: A filter over one side's documents: (allowed session codes or None, each document's
#: session code, allowed rowids or None, each document's rowid); None = no filter.
Mask = (
    tuple[
        npt.NDArray[np.int32] | None,
        npt.NDArray[np.int32],
        npt.NDArray[np.int64] | None,
        npt.NDArray[np.int64],
    ]
    | None
)


def doc_mask(
    where: VectorFilter,
    codes: dict[str, int],
    doc_session: npt.NDArray[np.int32],
    doc_rowid: npt.NDArray[np.int64],
) -> Mask:
    sessions = None
    if where.session_ids is not None:
        wanted = [codes[s] for s in where.session_ids if s in codes]
        sessions = np.array(wanted, dtype=np.int32)
    return (sessions, doc_session, where.rowids, doc_rowid)


def top_k(
    parts: list[tuple[npt.NDArray[np.int32], npt.NDArray[np.float64]]],
    n_docs: int,
    alive: npt.NDArray[np.bool_],
    rowids: npt.NDArray[np.int64],
    mask: Mask,
    k: int,
) -> list[tuple[int, float]]:
    """The best ``k`` live, allowed documents of one side as ``(rowid, score)``."""
    # Straight to intp: bincount casts any other index type to it, one more copy (1.8M
    # postings at 1M chunks: concatenate + bincount 6.3 -> 5.3 ms).
    all_docs = np.concatenate([d for d, _ in parts], dtype=np.intp)
    weights = np.concatenate([s for _, s in parts])
    scores = np.bincount(all_docs, weights=weights, minlength=n_docs)
    # Every matching document scores > 0 (IDF is floored above zero).
    candidates = np.flatnonzero(scores > 0.0)
    candidates = candidates[live_allowed(candidates, alive, mask)]
    if len(candidates) == 0:
        return []
    cand_scores = scores[candidates]
    # Every score tied with the k-th competes, so the top k does not depend on k.
    top = top_positions(cand_scores, k)
    found, best = rowids[candidates[top]], cand_scores[top]
    order = np.lexsort((-found, -best))[:k]
    return list(zip(found[order].tolist(), best[order].tolist(), strict=True))


def live_allowed(
    docs: npt.NDArray[np.int64], alive: npt.NDArray[np.bool_], mask: Mask
) -> npt.NDArray[np.bool_]:
    """Which of ``docs`` (numbers in one side) are alive and allowed by ``mask``."""
    keep = alive[docs]
    if mask is not None:
        sessions, doc_session, allowed, doc_rowid = mask
        if sessions is not None:
            keep &= np.isin(doc_session[docs], sessions)
        if allowed is not None:
            keep &= np.isin(doc_rowid[docs], allowed)
    return keep
