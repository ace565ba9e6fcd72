"""An optional second opinion on the best hits: a configured reranker (an LLM, a
cross-encoder) reorders the first :data:`RERANK_DEPTH` results of a search.

Never required and off by default: Mindfile's own ranking (fusion, smoothing, token
match) needs no model beyond the embedder. With ``mindfile.open(path,
reranker=...)`` (or ``mem.reranker = ...``) every search asks the reranker to score
its first 50 hits and returns them in the reranker's order (its score in
``hit.breakdown.rerank``; ``hit.score`` stays the fused score), the hits after
those in fused order. ``search(rerank=False)`` skips it for one call,
``search(rerank=other)`` uses another. :func:`mindfile.llm.llm_reranker` makes one from
any chat model.

A reranker that fails (raises, or answers with the wrong number of scores or a score
that is not a finite number) never fails the search: the hits come back in fused order
and ``results.degraded`` says why. It is called after the search has read everything,
holding no lock of the store's; inside a caller's transaction (which holds the write
lock) it is not called at all, and ``degraded`` says so: a network call must not hold
up every writer.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from mindfile.errors import InvalidInputError
from mindfile.storage.backend import AnyDatabase
from mindfile.types import SearchHit

__all__ = ["RERANK_DEPTH", "Ranking", "Reranker", "check_reranker", "rank_texts", "rerank_hits"]

logger = logging.getLogger("mindfile.retrieve")

#: How many of a search's first hits a reranker reorders (issue 14: "the top 50").
RERANK_DEPTH = 50


@runtime_checkable
class Reranker(Protocol):
    """Scores a query's candidate memories; a higher score is more relevant."""

    def score(self, query: str, texts: Sequence[str]) -> Sequence[float]:
        """One finite score per text, in the order given."""
        ...


def check_reranker(value: Any, what: str = "reranker") -> Reranker | None:
    """``value`` if it is a :class:`Reranker` (or None), else :class:`InvalidInputError`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Reranker) or not callable(value.score):
        raise InvalidInputError(
            f"{what} must have a score(query, texts) method, not {type(value).__name__}"
        )
    return value


def rerank_hits(
    db: AnyDatabase,
    reranker: Reranker,
    query: str,
    hits: Sequence[SearchHit],
    depth: int = RERANK_DEPTH,
) -> tuple[list[SearchHit], str | None]:
    """The first ``depth`` of ``hits`` in the reranker's order (:func:`rank_texts`),
    each with ``breakdown.rerank``, then the rest unchanged; or ``hits`` as they were
    and why the reranker did not run or failed."""
    head, tail = list(hits[:depth]), list(hits[depth:])
    ranking, why = rank_texts(db, reranker, query, [h.text for h in head])
    if ranking is None:
        return list(hits), why
    scores = ranking.scores
    ranked = [
        replace(head[i], breakdown=replace(head[i].breakdown, rerank=scores[i]))
        for i in ranking.order
    ]
    return ranked + tail, None


@dataclass(frozen=True, slots=True)
class Ranking:
    """A reranker's answer: ``scores[i]`` of text ``i``; ``order``, the positions best
    first (equal scores keep the given order)."""

    order: list[int]
    scores: list[float]


def rank_texts(
    db: AnyDatabase, reranker: Reranker, query: str, texts: Sequence[str]
) -> tuple[Ranking | None, str | None]:
    """The reranker's ranking of ``texts``, or None and why it did not run (inside the
    caller's transaction, which holds the write lock: no network call under it) or
    failed (``rerank unavailable: ...``; logged). Never raises."""
    if not texts:
        return Ranking([], []), None
    if db.held_by_me():
        return None, "rerank skipped inside a transaction"
    try:
        scores = [float(s) for s in reranker.score(query, list(texts))]
    except Exception as exc:  # a provider's own failure, or scores that are not numbers
        logger.warning("the reranker failed; fused order kept: %s", exc)
        return None, f"rerank unavailable: {exc}"
    why = None
    if len(scores) != len(texts):
        why = f"the reranker gave {len(scores)} scores for {len(texts)} hits"
    elif not all(math.isfinite(s) for s in scores):
        why = "a score that is not a finite number"
    if why is not None:
        logger.warning("%s; fused order kept", why)
        return None, f"rerank unavailable: {why}"
    return Ranking(sorted(range(len(scores)), key=lambda i: (-scores[i], i)), scores), None
