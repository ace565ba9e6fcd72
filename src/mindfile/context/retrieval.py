"""The memory legs of the context builder: scope, salience, relevance (and lexical).

**Scope** (docs/privacy.md). Memories come from

- the current session (minus its recent window, which is in the context verbatim),
- with ``cross_session``, the other sessions of the same user: ``user_id`` as passed,
  else the current session's own user. With ``agent_identity`` known (passed, or the
  current session's), only that agent's sessions. With no user at all, only other
  *unscoped* sessions of the same agent identity (and none without one): a context
  never crosses into a session that belongs to a user unless it is that user's,
- with a user, that user's notes (``memory:{user}``) and facts (``facts:{user}``).

Naming a session that belongs to another user than ``user_id`` is a
:class:`~mindfile.errors.ScopeError`. Conversation chunks must be newer than the
lookback cutoff (chunk ``created_at``); with a ``channel``, other sessions must be of
that channel (``sessions.channel``; for sessions stored without one, chunks whose
``metadata["channel"]`` is that channel). Notes and facts are durable knowledge:
neither the lookback nor the channel applies to them. Expired chunks (``expires_at <=
now`` and not pinned, the rule of :mod:`mindfile.manage.expiry`) are never recalled.

**Importance** is the *effective* importance of :mod:`mindfile.manage.importance`: 1.0
when pinned, else the stored importance, decayed from the last recorded use (or
creation) when the store has a decay policy.

**Legs.** *Salience*: pinned chunks and chunks whose effective importance is at or above
the threshold, in scope (the lookback does not apply: a pinned memory does not age out).
*Relevance*: the vector index's nearest chunks in scope with cosine at or above the
threshold. *Lexical* (optional): the top BM25 hits in scope, whatever their cosine.
Relevance and lexical run through the same :class:`~mindfile.retrieve.retriever.Retriever`
as ``search``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from mindfile.context.rerank import Candidate, Leg
from mindfile.embed import SEED_FUSION_WEIGHTS
from mindfile.embed.base import Vector
from mindfile.errors import ScopeError
from mindfile.manage.expiry import decay_policy
from mindfile.manage.importance import effective_importance
from mindfile.memory.facts import facts_session
from mindfile.memory.notes import notes_session
from mindfile.retrieve.authors import apply_authors
from mindfile.retrieve.feedback import HEAD as FEEDBACK_HEAD
from mindfile.retrieve.feedback import apply_feedback
from mindfile.retrieve.fusion import Fused, normalizers, weighted_fusion
from mindfile.retrieve.neighbors import apply_neighbors
from mindfile.retrieve.preferences import apply_preferences, leg_query
from mindfile.retrieve.reranker import RERANK_DEPTH, Reranker, rank_texts
from mindfile.retrieve.retriever import ReadFilter, Retriever
from mindfile.retrieve.search import DEFAULT_CANDIDATES
from mindfile.retrieve.temporal import apply_time, time_query
from mindfile.retrieve.token_match import TokenMatcher, apply_token_match
from mindfile.storage.backend import AnyDatabase, meta_store, recall_store, search_store
from mindfile.storage.recall import RecallStore, Scope
from mindfile.vector.base import VectorIndex

if TYPE_CHECKING:
    from mindfile.retrieve.lexical import Bm25Index

__all__ = ["Scope", "gather_candidates", "resolve_scope"]


def resolve_scope(
    db: AnyDatabase,
    session_id: str,
    *,
    user_id: str | None,
    agent_identity: str | None,
    channel: str | None,
    cross_session: bool,
    cutoff: datetime | None,
    now: datetime,
    recent_from: int | None,
    include_files: bool = False,
) -> Scope:
    """The scope for a context of ``session_id`` (its user and agent are looked up)."""
    found = recall_store(db).session_owner(session_id)
    stored_agent, owner = (None, None) if found is None else found
    if user_id is not None and owner is not None and owner != user_id:
        raise ScopeError(f"session {session_id!r} belongs to another user", session_id=session_id)
    user = user_id if user_id is not None else owner
    agent = agent_identity if agent_identity is not None else stored_agent
    namespaces = (notes_session(user), facts_session(user)) if user else ()
    return Scope(
        session_id=session_id,
        user_id=user,
        agent_identity=None if agent is None else str(agent),
        cross_session=cross_session,
        namespaces=namespaces,
        channel=channel,
        cutoff=None if cutoff is None else _iso(cutoff),
        now=_iso(now),
        recent_from=recent_from,
        include_files=include_files,
    )


def gather_candidates(
    db: AnyDatabase,
    index: VectorIndex,
    scope: Scope,
    query: str,
    query_vec: Vector | None,
    *,
    relevance_threshold: float,
    salience_threshold: float,
    candidate_pool: int,
    salient_pool: int,
    lexical_k: int,
    lexical: Bm25Index | None = None,
    hybrid_k: int = 0,
    fusion_weights: tuple[float, float] = SEED_FUSION_WEIGHTS,
    fusion_calibration: tuple[float, float] | None = None,
    hybrid_floor: float = -1.0,
    as_of: datetime | None = None,
    token_matcher: TokenMatcher | None = None,
    feedback: bool = False,
    authors: bool = False,
    preferences: bool = False,
    reranker: Reranker | None = None,
    notes: list[str] | None = None,
) -> list[Candidate]:
    """Candidates from every leg, one per chunk, with the legs that found it.

    The lexical leg ranks on the in-memory BM25 index when given, else on FTS5. The
    hybrid leg (``hybrid_k`` > 0) is ``search``'s ranking: each leg's best
    ``DEFAULT_CANDIDATES`` hits fused with the weights ``search`` uses; its top
    ``hybrid_k`` enter with their fused score as ``relevance``, except a hit without any
    BM25 match whose cosine is below ``hybrid_floor`` (nearest is not near); the fusion is
    ``search``'s default, calibrated with ``fusion_calibration`` (None: min-max). With
    ``as_of``, time expressions in the query boost the hybrid leg's fused scores as in
    ``search`` (:mod:`mindfile.retrieve.temporal`). With ``token_matcher`` (the
    embedder's, :func:`~mindfile.retrieve.token_match.matcher_for`), the hybrid leg's
    best candidates are reranked by token match as in ``search``. With ``feedback`` (and
    the BM25 index, and ``hybrid_k`` over :data:`~mindfile.retrieve.feedback.HEAD`),
    the hybrid leg after its first ``HEAD`` is lifted by feedback as in ``search``; the
    relevance of what follows the first ``HEAD`` keeps the order of its fused scores but
    is scaled to at most the ``HEAD``-th's (their order is search's, and the rerank sees
    no lifted memory above the first ten). With ``authors``, what follows the first
    ``HEAD`` is lifted by author match as in ``search``, scaled likewise. With
    ``preferences`` (a recommendation question, :mod:`mindfile.retrieve.preferences`),
    the BM25 leg searches the question's topic, and the user's statements join the
    hybrid leg and are lifted, as in ``search`` (``query_vec`` is then the topic's, the
    caller's doing); a lifted statement is admitted whatever its cosine. With
    ``reranker``, the hybrid leg's best
    :data:`~mindfile.retrieve.reranker.RERANK_DEPTH` are taken in its order, the k-th
    of them getting the k-th best fused score as its relevance (the scores the ranking
    formula sees keep their scale); why it could not run, if it failed, is appended to
    ``notes``.
    """
    legs: dict[int, set[Leg]] = {}
    scores: dict[int, float] = {}
    relevance: dict[int, float] = {}
    recall = recall_store(db)
    # Stored importance bounds the effective (decayed) one from above, so this is a
    # superset; the exact test runs on the loaded candidates.
    for rowid in recall.salient(scope, salience_threshold, salient_pool):
        legs.setdefault(rowid, set()).add("salience")
    sql, params = recall.scope_condition(scope)
    depth = DEFAULT_CANDIDATES if hybrid_k > 0 else 0
    flt = ReadFilter(condition=sql, params=tuple(params))
    retriever = Retriever(db, index, lexical)
    found = retriever.legs(
        leg_query(query, "bm25") if preferences else query,
        query_vec,
        flt,
        vector_k=max(candidate_pool, depth),
        lexical_k=max(lexical_k, depth),
    )
    for rowid, sim in found.vector[:candidate_pool]:
        if sim >= relevance_threshold:
            legs.setdefault(rowid, set()).add("relevance")
            scores[rowid] = sim
    for rowid, _ in found.lexical[:lexical_k]:
        legs.setdefault(rowid, set()).add("lexical")
    for rowid, sim in found.vector:
        scores.setdefault(rowid, sim)
    if hybrid_k > 0 and (found.vector or found.lexical):
        vector_leg = found.vector if query_vec is not None else []
        norms = normalizers("calibrated", fusion_calibration)  # search's default
        fused = weighted_fusion(vector_leg, found.lexical, *fusion_weights, norms=norms)
        if not vector_leg:  # no query vector: BM25 alone, as search degrades
            fused = weighted_fusion([], found.lexical, 0.0, 1.0, norms=norms)
        apply_neighbors(db, fused)  # as search does (mindfile.retrieve.neighbors)
        if token_matcher is not None and vector_leg:  # and token match, in hybrid mode
            apply_token_match(db, fused, token_matcher, query)
        tq = None if as_of is None else time_query(query, as_of)
        if tq is not None:
            apply_time(db, fused, tq)
        if preferences:  # a recommendation question, as search ranks one
            apply_preferences(
                db,
                fused,
                index=index,
                query_vec=query_vec if vector_leg else None,
                where=retriever.resolved(flt),
                vector_weight=fusion_weights[0],
                vector_width=fusion_calibration[0] if fusion_calibration is not None else 0.0,
            )
        ordered = _admitted(fused.values(), hybrid_floor)
        relevance.update((f.rowid, f.score) for f in fused.values())
        lift_feedback = feedback and lexical is not None
        if hybrid_k > FEEDBACK_HEAD and (lift_feedback or authors):
            head = ordered[:FEEDBACK_HEAD]
            if lift_feedback:
                apply_feedback(db, fused, head, retriever, query, flt, depth)
            if authors:
                apply_authors(
                    db, fused, head, query, hybrid_k, lambda f: _admissible(f, hybrid_floor)
                )
            pinned = {f.rowid for f in head}
            after = [f for f in fused.values() if f.rowid not in pinned]
            ordered = head + _admitted(after, hybrid_floor)
            top = max((f.score for f in after), default=0.0)
            if head and top > head[-1].score:  # in their order, below the head's last
                shrink = head[-1].score / top
                relevance.update((f.rowid, f.score * shrink) for f in after)
        if reranker is not None:
            ordered, why = _reranked(db, reranker, query, ordered, relevance)
            if why is not None and notes is not None:
                notes.append(why)
        best = ordered[:hybrid_k]
        for item in best:
            legs.setdefault(item.rowid, set()).add("hybrid")
    if not legs:
        return []
    half_life = decay_policy(meta_store(db)).half_life_seconds
    out = []
    for cand in _load(recall, legs, scores, relevance, query_vec, scope.now, half_life):
        if "salience" in cand.legs and not (cand.pinned or cand.importance >= salience_threshold):
            rest = cand.legs - {"salience"}
            if not rest:
                continue  # decayed below the threshold since it was stored
            cand = replace(cand, legs=rest)
        out.append(cand)
    return out


def _admitted(fused: Iterable[Fused], floor: float) -> list[Fused]:
    """The fused results the hybrid leg may admit, best first: a BM25 or feedback match,
    a statement lifted for a recommendation question, or a cosine at or above ``floor``
    (nearest is not near)."""
    return sorted((f for f in fused if _admissible(f, floor)), key=lambda f: (-f.score, f.rowid))


def _admissible(f: Fused, floor: float) -> bool:
    return (
        f.fts is not None or bool(f.feedback) or bool(f.preference) or (f.vector or -1.0) >= floor
    )


def _reranked(
    db: AnyDatabase,
    reranker: Reranker,
    query: str,
    ordered: list[Fused],
    relevance: dict[int, float],
) -> tuple[list[Fused], str | None]:
    """``ordered`` with its first :data:`RERANK_DEPTH` in the reranker's order, their
    fused scores handed down that order in ``relevance``; unchanged (and why) when the
    reranker fails or the caller's transaction holds the write lock."""
    head = ordered[:RERANK_DEPTH]
    if not head:
        return ordered, None
    rows = search_store(db).chunk_rows([f.rowid for f in head])
    head = [f for f in head if f.rowid in rows]
    ranking, why = rank_texts(db, reranker, query, [str(rows[f.rowid][3]) for f in head])
    if ranking is None:
        return ordered, why
    fused_scores = [relevance[f.rowid] for f in head]  # best first
    reranked = [head[i] for i in ranking.order]
    for item, score in zip(reranked, fused_scores, strict=True):
        relevance[item.rowid] = score
    return reranked + ordered[len(head) :], None


def _load(
    recall: RecallStore,
    legs: dict[int, set[Leg]],
    scores: dict[int, float],
    relevance: dict[int, float],
    query_vec: Vector | None,
    now: str,
    half_life: float | None,
) -> list[Candidate]:
    out = []
    for row in recall.candidates(list(legs)):
        rowid, pinned = row.rowid, row.pinned
        vector = _vector(row.vector)
        sim = scores.get(rowid)
        if sim is None:
            sim = 0.0 if vector is None or query_vec is None else float(np.dot(vector, query_vec))
        importance = effective_importance(
            row.importance,
            pinned=pinned,
            last_used=row.last_used,
            now=now,
            half_life_seconds=half_life,
        )
        out.append(
            Candidate(
                chunk_id=row.chunk_id,
                session_id=row.session_id,
                text=row.text,
                similarity=sim,
                created_at=parse_time(row.created_at),
                importance=importance,
                pinned=pinned,
                content_hash=row.content_hash,
                legs=frozenset(legs[rowid]),
                sequence_end=row.sequence_end,
                metadata=json.loads(row.metadata_json),
                vector=vector,
                # With the hybrid leg on, every candidate is ranked on its scale (one
                # found by salience alone has no fused score: 0).
                relevance=relevance.get(rowid, 0.0) if relevance else None,
                occurred_at=None if row.occurred_at is None else parse_time(row.occurred_at),
            )
        )
    return out


def _vector(blob: bytes | None) -> npt.NDArray[np.float32] | None:
    if blob is None:
        return None
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


def parse_time(text: str) -> datetime:
    """An Mindfile timestamp as an aware datetime (naive ones are taken as UTC)."""
    value = datetime.fromisoformat(text)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="microseconds")
