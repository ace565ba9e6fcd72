"""The read path: one entry point for vector, full-text and hybrid search."""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from operator import itemgetter
from typing import TYPE_CHECKING, Any, get_args

import numpy as np

from mindfile.embed import fusion_calibration
from mindfile.embed.base import Embedder, Vector, check_query_vector, normalize
from mindfile.errors import EmbeddingError, InvalidInputError, MindfileError
from mindfile.index.chunking import normalize_text
from mindfile.index.pipeline import check_id, check_time, normalize_tags
from mindfile.retrieve.authors import apply_authors
from mindfile.retrieve.degraded import degrade
from mindfile.retrieve.feedback import HEAD as FEEDBACK_HEAD
from mindfile.retrieve.feedback import apply_feedback
from mindfile.retrieve.fusion import (
    Fused,
    add_tail,
    normalizers,
    rank_key,
    rrf_fusion,
    weighted_fusion,
)
from mindfile.retrieve.neighbors import Around, apply_neighbors, prefetch
from mindfile.retrieve.preferences import apply_preferences, leg_query, recommendation_intent
from mindfile.retrieve.reranker import RERANK_DEPTH, Reranker, rerank_hits
from mindfile.retrieve.retriever import Hits, ReadFilter, Retriever
from mindfile.retrieve.temporal import apply_time, describe, time_query
from mindfile.retrieve.token_match import (
    Scored,
    TokenMatcher,
    apply_token_match,
    matcher_for,
    prescore,
)
from mindfile.storage.backend import AnyDatabase, search_store
from mindfile.types import FusionMode, ScoreBreakdown, SearchHit, SearchMode
from mindfile.vector.base import VectorIndex

if TYPE_CHECKING:
    from mindfile.retrieve.lexical import Bm25Index

__all__ = [
    "DEFAULT_CANDIDATES",
    "MAX_CANDIDATES",
    "MAX_TOP_K",
    "SearchRequest",
    "SearchResults",
    "read_filter",
    "run_search",
]

MAX_TOP_K = 1000
#: How many of each leg's best hits are fused (docs/retrieval.md, "Candidate depth").
#: Fixed, not derived from ``top_k``: asking for more results never changes which are
#: best, nor any result's score.
DEFAULT_CANDIDATES = 150
MAX_CANDIDATES = 1000


class SearchResults(list[SearchHit]):
    """A list of hits that also says how it was made.

    ``mode`` is the mode that actually ran; ``degraded`` explains why it differs from
    the requested one (e.g. the embedder failed and search fell back to full-text).
    """

    def __init__(
        self,
        hits: Sequence[SearchHit] = (),
        *,
        mode: str = "hybrid",
        degraded: str | None = None,
        weights: tuple[float, float] | None = None,
        time: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(hits)
        self.mode = mode
        self.degraded = degraded
        #: The (vector, BM25) fusion weights that were used.
        self.weights = weights
        #: The query's time expressions as understood (``as_of``, ``windows`` with their
        #: text, start and end, ``order``), or None when it named no time.
        self.time = time

    def to_dict(self) -> dict[str, Any]:
        """``{"mode", "degraded", "weights", "time", "hits": [...]}``."""
        return {
            "mode": self.mode,
            "degraded": self.degraded,
            "weights": None if self.weights is None else list(self.weights),
            "time": self.time,
            "hits": [h.to_dict() for h in self],
        }


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """A validated search."""

    query: str
    session_ids: tuple[str, ...] | None
    tags: tuple[str, ...]
    top_k: int
    mode: SearchMode
    fusion: FusionMode
    vector_weight: float
    fts_weight: float
    min_score: float | None
    query_embedding: Vector | None
    candidates: int = DEFAULT_CANDIDATES
    user_id: str | None = None
    channel: str | None = None
    source: str = "all"
    #: The query date that time expressions are resolved against (None: now).
    as_of: datetime | None = None
    #: Boost memories from the time the query names (docs/retrieval.md).
    temporal: bool = True
    #: Boost the user's stated preferences for recommendation questions.
    preferences: bool = True
    #: Lift memories next to strong matches in their conversation (neighbour smoothing).
    neighbors: bool = True
    #: Rerank the best candidates by their closest word pieces (token match).
    token_match: bool = True
    #: Lift what the best results' shared words find, after the first ten (feedback).
    feedback: bool = True
    #: Lift what the authors the query names wrote, after the first ten (author match).
    authors: bool = True
    #: Each session's first this many results come first, the rest of the ranking after
    #: them (None: the ranking as it is; docs/retrieval.md "Results from many sessions").
    per_session: int | None = None

    @classmethod
    def build(
        cls,
        query: Any,
        *,
        session_id: str | Sequence[str] | None,
        tags: Sequence[str] | None,
        top_k: Any,
        mode: Any,
        fusion: Any,
        vector_weight: Any,
        fts_weight: Any,
        min_score: Any,
        query_embedding: Any,
        dims: int,
        default_weights: tuple[float, float] = (0.7, 0.3),
        candidates: Any = DEFAULT_CANDIDATES,
        user_id: Any = None,
        channel: Any = None,
        source: Any = "all",
        as_of: Any = None,
        temporal: Any = True,
        preferences: Any = True,
        neighbors: Any = True,
        token_match: Any = True,
        feedback: Any = True,
        authors: Any = True,
        per_session: Any = None,
    ) -> SearchRequest:
        if source not in SOURCES:
            raise InvalidInputError(f"source must be one of {SOURCES}, not {source!r}")
        if not isinstance(query, str):
            raise InvalidInputError(f"query must be a string, not {type(query).__name__}")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise InvalidInputError(f"top_k must be an integer from 1 to {MAX_TOP_K}")
        if mode not in get_args(SearchMode):
            raise InvalidInputError(f"mode must be one of {get_args(SearchMode)}, not {mode!r}")
        if fusion not in get_args(FusionMode):
            raise InvalidInputError(f"fusion must be one of {get_args(FusionMode)}")
        weights = _weights(vector_weight, fts_weight, default_weights)
        if min(weights) < 0:
            raise InvalidInputError("weights must not be negative")
        floor = None if min_score is None else _number(min_score, "min_score")
        if (
            isinstance(candidates, bool)
            or not isinstance(candidates, int)
            or not 1 <= candidates <= MAX_CANDIDATES
        ):
            raise InvalidInputError(f"candidates must be an integer from 1 to {MAX_CANDIDATES}")
        if not isinstance(temporal, bool):
            raise InvalidInputError("temporal must be True or False")
        if not isinstance(preferences, bool):
            raise InvalidInputError("preferences must be True or False")
        if not isinstance(neighbors, bool):
            raise InvalidInputError("neighbors must be True or False")
        if not isinstance(token_match, bool):
            raise InvalidInputError("token_match must be True or False")
        if not isinstance(feedback, bool):
            raise InvalidInputError("feedback must be True or False")
        if not isinstance(authors, bool):
            raise InvalidInputError("authors must be True or False")
        if per_session is not None and (
            isinstance(per_session, bool) or not isinstance(per_session, int) or per_session < 1
        ):
            raise InvalidInputError("per_session must be None or an integer of at least 1")
        return cls(
            query=query,
            session_ids=_sessions(session_id),
            tags=tuple(normalize_tags(tags, strict=False)),
            top_k=top_k,
            mode=mode,
            fusion=fusion,
            vector_weight=weights[0],
            fts_weight=weights[1],
            min_score=floor,
            query_embedding=_embedding(query_embedding, dims),
            candidates=candidates,
            user_id=None if user_id is None else check_id(user_id, "user_id"),
            channel=None if channel is None else check_id(channel, "channel"),
            source=source,
            as_of=None if as_of is None else check_time(as_of, "as_of"),
            temporal=temporal,
            preferences=preferences,
            neighbors=neighbors,
            token_match=token_match,
            feedback=feedback,
            authors=authors,
            per_session=per_session,
        )


#: ``search(source=...)``: everything, synced files only, or everything else.
SOURCES = ("all", "files", "conversations")


def _weights(vector: Any, fts: Any, default: tuple[float, float]) -> tuple[float, float]:
    """Both given: as given. One given: the other is its complement to 1. None: default."""
    if vector is None and fts is None:
        return default
    if vector is None:
        f = _number(fts, "fts_weight")
        return max(0.0, 1.0 - f), f
    v = _number(vector, "vector_weight")
    if fts is None:
        return v, max(0.0, 1.0 - v)
    return v, _number(fts, "fts_weight")


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"{what} must be a finite number")
    return float(value)


def _sessions(session_id: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if session_id is None:
        return None
    if isinstance(session_id, str):
        return (check_id(session_id, "session_id"),)
    if isinstance(session_id, bytes | bytearray) or not isinstance(session_id, Sequence):
        raise InvalidInputError("session_id must be a string, a list of strings, or None")
    return tuple(check_id(s, "session_id") for s in session_id)


def _embedding(value: Any, dims: int) -> Vector | None:
    if value is None:
        return None
    try:
        arr = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError("query_embedding must be a sequence of numbers") from exc
    if arr.shape != (dims,) or not np.all(np.isfinite(arr)):
        raise InvalidInputError(f"query_embedding must be {dims} finite numbers")
    return normalize(arr)


def run_search(
    db: AnyDatabase,
    index: VectorIndex,
    embedder: Embedder,
    req: SearchRequest,
    lexical: Bm25Index | None = None,
    *,
    reranker: Reranker | None = None,
) -> SearchResults:
    """Run both legs as the mode asks, fuse, and build hits; with ``reranker``, its
    order for the first :data:`~mindfile.retrieve.reranker.RERANK_DEPTH` of them
    (:mod:`mindfile.retrieve.reranker`).

    The legs run through the one read path (:class:`Retriever`), the BM25 leg on the
    in-memory ``lexical`` index when given and ready, else on FTS5.
    """
    if reranker is None:
        return _run(db, index, embedder, req, lexical)
    # The first RERANK_DEPTH hits whatever top_k is (so top_k=5 stays a prefix of 20).
    found = _run(db, index, embedder, replace(req, top_k=max(req.top_k, RERANK_DEPTH)), lexical)
    hits, why = rerank_hits(db, reranker, req.query, found, RERANK_DEPTH)
    degraded = "; ".join(m for m in (found.degraded, why) if m) or None
    return SearchResults(
        hits[: req.top_k],
        mode=found.mode,
        degraded=degraded,
        weights=found.weights,
        time=found.time,
    )


def _run(
    db: AnyDatabase,
    index: VectorIndex,
    embedder: Embedder,
    req: SearchRequest,
    lexical: Bm25Index | None,
) -> SearchResults:
    # Each leg's top `depth` hits are fused; when more results are asked for than that,
    # the legs go deeper only to extend the tail (hits that did not make any leg's top
    # `depth` score 0 and follow in leg-rank order), so the best results and every
    # score are the same whatever top_k is (docs/retrieval.md).
    depth = req.candidates
    pool = max(depth, req.top_k)
    weights = (req.vector_weight, req.fts_weight)
    mode: str = req.mode
    degraded: str | None = None
    flt = read_filter(db, req)
    if flt.empty:
        return SearchResults([], mode=mode, weights=weights)
    query_vec: Vector | None = None
    intent = req.preferences and recommendation_intent(req.query)
    if req.mode in ("vector", "hybrid"):
        try:
            query_vec = _query_vector(
                embedder, req, leg_query(req.query, "vector") if intent else req.query
            )
        except EmbeddingError as exc:
            if req.mode == "vector":
                raise
            mode, degraded = "fts", f"vector search unavailable: {exc.message}"
    matcher = matcher_for(embedder) if req.token_match and req.fusion != "rrf" else None
    retriever = Retriever(db, index, lexical)
    legs = retriever.legs(
        leg_query(req.query, "bm25") if intent else req.query,
        query_vec,
        flt,
        vector_k=pool if mode in ("vector", "hybrid") else 0,
        lexical_k=pool if mode in ("fts", "hybrid") else 0,
        then=partial(_side_scores, db, req, matcher) if mode == "hybrid" else None,
        meanwhile=partial(_side_around, db, req) if mode == "hybrid" else None,
    )
    vector_hits, fts_hits = legs.vector, legs.lexical
    head_v, head_f = vector_hits[:depth], fts_hits[:depth]
    calibration = fusion_calibration(embedder)
    if req.fusion == "rrf":
        fused = rrf_fusion(head_v, head_f, req.vector_weight, req.fts_weight)
    else:
        norms = normalizers(req.fusion, calibration)
        if mode == "hybrid":
            fused = weighted_fusion(head_v, head_f, *weights, norms=norms)
        else:  # a single leg: its own normalised score, weight 1
            fused = weighted_fusion(head_v, head_f, 1.0, 1.0, norms=norms)
    # Vectors missing (embedder down, jobs pending): see mindfile.retrieve.degraded.
    fused, degraded = degrade(db, fused, head_f, req, mode=mode, degraded=degraded)
    if req.neighbors and mode == "hybrid":  # neighbour smoothing (retrieve/neighbors.py)
        apply_neighbors(db, fused, known=legs.meanwhile)
    if matcher is not None and mode == "hybrid":  # token match (retrieve/token_match.py)
        apply_token_match(db, fused, matcher, req.query, known=legs.then)
    tq = time_query(req.query, req.as_of or datetime.now(UTC)) if req.temporal else None
    if tq is not None:  # before the tail: only the fused candidates are boosted
        apply_time(db, fused, tq)
    if intent:  # a recommendation question (mindfile.retrieve.preferences)
        apply_preferences(
            db,
            fused,
            index=index,
            query_vec=query_vec if mode == "hybrid" and req.fusion != "rrf" else None,
            where=retriever.resolved(flt),
            vector_weight=req.vector_weight,
            vector_width=calibration[0]
            if req.fusion == "calibrated" and calibration is not None
            else 0.0,
        )
    add_tail(fused, vector_hits[depth:], fts_hits[depth:], start=depth + 1)
    head: list[Fused] = []
    # A per-session cap reaches past the first top_k: the ranking after the first
    # FEEDBACK_HEAD is then made whatever top_k is (so top_k=5 stays a prefix of 50).
    deep = req.top_k > FEEDBACK_HEAD or req.per_session is not None
    after_head = mode == "hybrid" and req.fusion != "rrf" and deep
    feedback = after_head and req.feedback and lexical is not None
    if feedback or (after_head and req.authors):  # ranks after the first FEEDBACK_HEAD only
        head = _order(db, _passing(fused.values(), req), FEEDBACK_HEAD, depth)[:FEEDBACK_HEAD]
    if feedback:  # retrieve/feedback.py
        apply_feedback(db, fused, head, retriever, req.query, flt, depth)
    if after_head and req.authors:  # retrieve/authors.py
        limit = req.top_k if req.per_session is None else len(fused)
        apply_authors(db, fused, head, req.query, limit)
    return SearchResults(
        _hits(db, fused, req, head),
        mode=mode,
        degraded=degraded,
        weights=weights,
        time=describe(tq),
    )


def _side_scores(
    db: AnyDatabase, req: SearchRequest, matcher: TokenMatcher | None, hits: Hits
) -> Scored | None:
    """On the side thread, right after the BM25 leg: its best hits' token-match scores."""
    return prescore(db, matcher, req.query, hits) if matcher is not None else None


def _side_around(db: AnyDatabase, req: SearchRequest, hits: Hits) -> Around | None:
    """On the searching thread once its vector leg is done, while the side thread
    scores: the turns around the BM25 leg's best hits (neighbour smoothing). The two
    used to run one after the other on the side thread while this one waited (at 1M
    chunks the side thread ended ~2.7 ms after the vector leg)."""
    return prefetch(db, hits) if req.neighbors else None


def read_filter(db: AnyDatabase, req: SearchRequest) -> ReadFilter:
    """The request's sessions and tags, narrowed to its user's (and channel's) sessions
    and to its source (synced files or conversations)."""
    flt = ReadFilter(session_ids=req.session_ids, tags=req.tags)
    if req.user_id is not None or req.channel is not None:
        flt = flt.narrow(search_store(db).scoped_sessions(user_id=req.user_id, channel=req.channel))
    if req.source != "all":
        flt = flt.narrow(search_store(db).source_sessions(files=req.source == "files"))
    return flt


def _order(db: AnyDatabase, items: list[Fused], limit: int, depth: int) -> list[Fused]:
    """Items in result order (:func:`rank_key`), exact for the first ``limit``; the
    items after those follow in no particular order.

    Equal scores go to the most recent chunk, which needs ``sequence_end`` from SQLite;
    it is loaded only for the tie groups that reach into the first ``limit`` (usually
    none), not for every candidate. Each key is computed once and only the first
    ``limit`` (and their tie group) are sorted: ~300 candidates, ~0.4 ms less a search.
    """
    keyed = [(rank_key(f, 0, depth), f) for f in items]
    if limit < len(keyed):
        first = heapq.nsmallest(limit, keyed, key=itemgetter(0)) if limit > 0 else []
        edge = first[-1][0][:2] if first else None
        chosen = {id(f) for _, f in first}
        # The tie group that straddles the limit is ordered in full.
        head = first + [kf for kf in keyed if kf[0][:2] == edge and id(kf[1]) not in chosen]
        chosen.update(id(f) for _, f in head)
        rest = [f for _, f in keyed if id(f) not in chosen]
    else:
        head, rest = keyed, []
    head.sort(key=itemgetter(0))
    tied: list[int] = []
    i = 0
    while i < len(head):
        j = i + 1
        while j < len(head) and head[j][0][:2] == head[i][0][:2]:
            j += 1
        if j - i > 1:
            tied.extend(f.rowid for _, f in head[i:j])
        i = j
    ranked = [f for _, f in head]
    if tied:
        ends = search_store(db).chunk_ends(tied)
        ranked.sort(key=lambda f: rank_key(f, ends.get(f.rowid, 0), depth))
    return ranked + rest


def _spread(
    db: AnyDatabase, ranked: list[Fused], per_session: int, top_k: int
) -> tuple[list[Fused], dict[int, tuple[Any, ...]]]:
    """The first ``top_k`` of ``ranked`` (the whole ranking, in order) re-ordered so that
    each session's first ``per_session`` results come first, in ranking order, and the
    rest of the ranking after them, in its order. Also their rows
    (:meth:`~mindfile.storage.search.SearchStore.chunk_rows`); the ranking is read in
    pages until ``top_k`` are found."""
    counts: dict[str, int] = {}
    kept: list[Fused] = []
    later: list[Fused] = []
    rows: dict[int, tuple[Any, ...]] = {}
    page = max(top_k, 32)
    for start in range(0, len(ranked), page):
        chunk = ranked[start : start + page]
        found = search_store(db).chunk_rows([f.rowid for f in chunk])
        rows.update(found)
        for f in chunk:
            if f.rowid not in found:
                continue  # deleted since the legs ran
            session = str(found[f.rowid][2])
            seen = counts.get(session, 0)
            counts[session] = seen + 1
            (kept if seen < per_session else later).append(f)
        if len(kept) >= top_k:
            return kept[:top_k], rows
    return (kept + later)[:top_k], rows


def _query_vector(embedder: Embedder, req: SearchRequest, text: str) -> Vector:
    if req.query_embedding is not None:
        return req.query_embedding
    try:
        raw = embedder.embed_query(normalize_text(text))
    except MindfileError:
        raise
    except Exception as exc:  # a provider's own failure
        raise EmbeddingError(f"query embedding failed: {exc}") from exc
    return check_query_vector(raw, embedder.dimensions, embedder.model_id)


def _passing(items: Iterable[Fused], req: SearchRequest) -> list[Fused]:
    """``items`` that reach ``req.min_score`` (all of them without one)."""
    if req.min_score is None:
        return list(items)
    floor = req.min_score
    return [f for f in items if f.score >= floor]


def _hits(
    db: AnyDatabase, fused: dict[int, Fused], req: SearchRequest, head: Sequence[Fused] = ()
) -> list[SearchHit]:
    """The first ``req.top_k`` results as hits: ``head`` first (the results feedback
    leaves in place, already ordered), then the other candidates in result order (with
    ``req.per_session``, spread over sessions: :func:`_spread`).

    A hit's score is shown at most at the score shown above it (scores never increase
    down the list: after a ``head``, or spread over sessions, a result may hold more
    than the one before); its order follows its own score."""
    if not fused:
        return []
    pinned = {f.rowid for f in head}
    candidates = _passing((f for f in fused.values() if f.rowid not in pinned), req)
    first = _passing(head, req)
    if req.per_session is not None:  # (_spread skips rows deleted since the legs ran)
        ranked = first + _order(db, candidates, len(candidates), req.candidates)
        items, rows = _spread(db, ranked, req.per_session, req.top_k)
    else:
        ranked = first + _order(db, candidates, req.top_k - len(first), req.candidates)
        rows = search_store(db).chunk_rows([f.rowid for f in ranked[: req.top_k]])
        items = [f for f in ranked[: req.top_k] if f.rowid in rows]
        if len(items) < req.top_k and len(ranked) > req.top_k:
            # Some candidates vanished (deleted since the legs ran): fall back to all.
            ranked = first + _order(db, ranked[len(first) :], len(ranked), req.candidates)
            rows = search_store(db).chunk_rows([f.rowid for f in ranked])
            items = [f for f in ranked if f.rowid in rows]
    hits = []
    shown = math.inf
    for f in items[: req.top_k]:
        _, chunk_id, session_id, text, seq_start, seq_end, meta, occurred = rows[f.rowid]
        score = shown = min(f.score, shown)
        hits.append(
            SearchHit(
                chunk_id=chunk_id,
                session_id=session_id,
                text=text,
                sequence_start=int(seq_start),
                sequence_end=int(seq_end),
                metadata=json.loads(meta),
                score=score,
                breakdown=ScoreBreakdown(
                    vector=f.vector,
                    fts=f.fts,
                    vector_norm=f.vector_norm,
                    fts_norm=f.fts_norm,
                    fused=score,
                    vector_rank=f.vector_rank,
                    fts_rank=f.fts_rank,
                    time=f.time,
                    preference=f.preference,
                    neighbors=f.neighbors,
                    token_match=f.token_match,
                    feedback=f.feedback,
                    author=f.author,
                ),
                occurred_at=str(occurred),
            )
        )
    return hits
