"""Feedback: the words the best results share, searched for again, lift what they find
in the results after the first ten (docs/retrieval.md "Feedback").

Evidence that shares no word with a question often shares words with the memories that
do: "What pets does Nate have?" finds Nate's turns about his dog by name, and the turn
that answers ("this is Max! [image: a dog]") only through "dog". Pseudo-relevance
feedback (RM3, Lavrenko and Croft 2001) reads the best results as a description of what
is wanted: each content word of the best :data:`DOCS` results is weighted by how much of
its result it is and by how good that result is, the :data:`TERMS` heaviest that are
not in the query become a weighted BM25 query, and its hits get up to :data:`WEIGHT` x
their calibrated BM25 score added.

Only results after the first :data:`HEAD` change. They are the ones a question asks for
when it wants more than a few (``top_k`` > 10: an aggregate question, a context to
pack), the first ten stay as they are (r@10 is unchanged by construction, and
``search(top_k=10)`` stays a prefix of ``top_k=50``), and a search for ten or fewer pays
nothing. The BM25 query reads at most ``candidates`` hits, whatever ``top_k`` is, so
deeper searches keep every earlier result and score.

Chosen by cross-validation on LoCoMo (benchmarks/README.md "Feedback"): ``DOCS`` 5,
``TERMS`` 30, ``WEIGHT`` 1.0, the results weighted by ``exp(2 x (score - best))``, the
words by their share of the result (not by IDF).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mindfile.retrieve.fusion import Fused
from mindfile.storage.backend import AnyDatabase, search_store

if TYPE_CHECKING:
    from mindfile.retrieve.lexical import Bm25Index
    from mindfile.retrieve.retriever import ReadFilter, Retriever

__all__ = ["DOCS", "HEAD", "POSTINGS", "TERMS", "WEIGHT", "apply_feedback", "expansion"]

#: The first results, never changed by feedback (and the ``top_k`` up to which it
#: does not run).
HEAD = 10
#: The best results whose words are read.
DOCS = 5
#: The heaviest words searched for.
TERMS = 30
#: The lift: this times the BM25 score of the feedback query, calibrated as the BM25 leg
#: is (divided by the larger of the best score and :data:`SCALE`).
WEIGHT = 1.0
SCALE = 8.0
#: How fast a result's weight falls with its distance from the best score.
SHARPNESS = 2.0
#: The postings the feedback query may read (its cost): words are taken heaviest first
#: while theirs fit. A LoCoMo conversation never reaches it (30 words of ~600 turns);
#: at 117k chunks of chat, 30 words read ~1.3M postings (~25 ms) without it.
POSTINGS = 64_000


def expansion(
    lexical: Bm25Index, query: str, best: Sequence[tuple[float, str]]
) -> tuple[list[str], list[float]]:
    """The feedback query from ``best`` (``(score, text)`` of the best results, best
    first): its index terms and their weights (the heaviest 1.0), query terms left out."""
    if not best:
        return [], []
    top = best[0][0]
    weight: dict[str, float] = {}
    for score, text in best:
        terms = lexical.content_terms(text)
        if not terms:
            continue
        share = math.exp(SHARPNESS * (score - top)) / len(terms)
        for term in terms:
            weight[term] = weight.get(term, 0.0) + share
    for term in lexical.query_terms(query):
        weight.pop(term, None)
    ranked = sorted(weight.items(), key=lambda tw: (-tw[1], tw[0]))
    chosen: list[tuple[str, float]] = []
    budget = POSTINGS
    # Heaviest first; a word whose postings no longer fit the budget is skipped (the
    # commonest words of a large store: each costs ~20 ns a posting to score).
    for start in range(0, len(ranked), TERMS):
        page = ranked[start : start + TERMS]
        for (term, w), n in zip(page, lexical.postings([t for t, _ in page]), strict=True):
            if n <= budget and len(chosen) < TERMS:
                chosen.append((term, w))
                budget -= n
        if len(chosen) == TERMS or budget <= 0:
            break
    if not chosen:
        return [], []
    heaviest = chosen[0][1]
    return [t for t, _ in chosen], [w / heaviest for _, w in chosen]


def apply_feedback(
    db: AnyDatabase,
    fused: dict[int, Fused],
    head: list[Fused],
    retriever: Retriever,
    query: str,
    flt: ReadFilter,
    depth: int,
) -> None:
    """Lift ``fused``'s results outside ``head`` (the first results, in order) by what
    the feedback query finds, adding its hits that are not candidates yet; sets each
    lifted or added result's ``feedback``. Nothing when the BM25 index is not ready."""
    lexical = retriever.lexical
    if lexical is None or not head:
        return
    best = head[:DOCS]
    rows = search_store(db).chunk_rows([f.rowid for f in best])
    texts = [(f.score, str(rows[f.rowid][3])) for f in best if f.rowid in rows]
    terms, weights = expansion(lexical, query, texts)
    if not terms:
        return
    hits = retriever.weighted_lexical(terms, weights, flt, depth)
    if not hits:
        return
    scale = max(hits[0][1], SCALE)
    pinned = {f.rowid for f in head}
    for item in fused.values():
        if item.rowid not in pinned:
            item.feedback = 0.0
    for rowid, score in hits:
        if rowid in pinned:
            continue
        lift = WEIGHT * score / scale
        if rowid not in fused:  # found only by the feedback query
            fused[rowid] = Fused(rowid)
        item = fused[rowid]
        item.feedback = lift
        item.score += lift
