"""Retrieval: search and the optional reranker (docs/retrieval.md)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Literal

from mindfile._api._facet import Facet
from mindfile.embed import fusion_weights
from mindfile.errors import InvalidInputError
from mindfile.retrieve.reranker import Reranker, check_reranker
from mindfile.retrieve.search import (
    DEFAULT_CANDIDATES,
    SearchRequest,
    SearchResults,
    run_search,
)
from mindfile.types import FusionMode, MemoryHybridQueryRequest, SearchMode

__all__ = ["SearchAPI"]


class SearchAPI(Facet):
    """Search on :class:`mindfile.Mindfile`."""

    @property
    def reranker(self) -> Reranker | None:
        """The optional reranker every search uses (``search(rerank=...)``;
        docs/retrieval.md "Reranking"); set it (or None) at any time."""
        return self._mindfile._reranker

    @reranker.setter
    def reranker(self, value: Reranker | None) -> None:
        self._mindfile._reranker = check_reranker(value)

    def search(
        self,
        query: str,
        *,
        session_id: str | Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        top_k: int = 10,
        mode: SearchMode = "hybrid",
        fusion: FusionMode = "calibrated",
        vector_weight: float | None = None,
        fts_weight: float | None = None,
        min_score: float | None = None,
        query_embedding: Sequence[float] | None = None,
        candidates: int = DEFAULT_CANDIDATES,
        user_id: str | None = None,
        channel: str | None = None,
        source: Literal["all", "files", "conversations"] = "all",
        as_of: datetime | date | str | float | None = None,
        temporal: bool = True,
        preferences: bool = True,
        neighbors: bool = True,
        token_match: bool = True,
        feedback: bool = True,
        authors: bool = True,
        per_session: int | None = None,
        rerank: bool | Reranker = True,
    ) -> SearchResults:
        """Search chunks by vector similarity, BM25, or both fused.

        ``session_id``: one id, a list, or None for the whole store. ``tags``: every tag
        must be on the chunk (filtered in SQL). ``user_id`` / ``channel``: only sessions
        of that user / channel (with ``session_id`` too: the sessions in both), filtered
        inside both legs before fusion (docs/privacy.md). Calibrated fusion (the default)
        scales each list on an absolute floor (for the bundled model: cosine over a range
        of at least 0.2, BM25 over at least 8; an embedder that recommends no scales,
        :func:`mindfile.embed.fusion_calibration`, gets min-max) and combines them with
        the weights, so a few close candidates keep close scores; ``fusion="weighted"``
        min-max normalises each list (the seed's);
        ``fusion="rrf"`` uses reciprocal rank fusion (k=60) with the same weights. Ties go
        to the most recent chunk.

        Weights left as ``None`` are the embedder's recommendation
        (:func:`mindfile.embed.fusion_weights`): 0.3 vector / 0.7 BM25 for the bundled
        static model (measured on LoCoMo, docs/retrieval.md), the seed's 0.7 / 0.3 for
        any other embedder; giving only one makes the other its complement to 1.
        ``results.weights`` says which were used.

        ``candidates`` (default 150) is how many of each leg's best hits are fused. It does
        not follow ``top_k``: the first results and every score are the same whatever
        ``top_k`` is (``search(q, top_k=5)`` is a prefix of ``search(q, top_k=20)``);
        results beyond the fused candidates score 0 and follow in leg-rank order.

        ``source``: ``"files"`` searches only synced folders (:meth:`sync`; hits carry
        ``metadata["path"]``, ``["start_line"]``, ``["end_line"]``), ``"conversations"``
        everything else, ``"all"`` (default) both.

        Time-aware (docs/retrieval.md): time expressions in the query ("last May", "two
        weeks ago", "in 2023", "yesterday", "latest", "first") are resolved against
        ``as_of`` (default now) and boost memories whose time (``store(occurred_at=)``,
        else when stored) is in or near the named window, or the newest / oldest ones;
        ``hit.breakdown.time`` is the boost, ``results.time`` what was understood.
        ``temporal=False`` turns it off.

        Preference recall (docs/retrieval.md): a question asking for a recommendation or
        advice ("can you recommend...", "what should I cook", "any ideas for...") boosts
        memories where the user states a preference, habit, possession or constraint
        ("I've been learning Premiere Pro", "I'm vegetarian"); ``hit.breakdown.preference``
        is the boost. ``preferences=False`` turns it off.

        Neighbour smoothing (docs/retrieval.md), in hybrid mode: a memory within two turns
        of a strong match in the same conversation gets half of that match's score added
        (the answer often follows the turn that repeats the question's words);
        ``hit.breakdown.neighbors`` is the lift. ``neighbors=False`` turns it off.

        Token match (docs/retrieval.md), in hybrid mode with the bundled model: the best
        100 candidates are reranked by how closely each word of the query matches some
        word of the memory in the model's token space ("peace" finds "a peaceful
        spot", "family" finds "my mother"); ``hit.breakdown.token_match`` is the lift.
        ``token_match=False`` turns it off.

        Feedback (docs/retrieval.md "Feedback"), in hybrid mode, for the results after
        the first 10 (so only when ``top_k`` > 10): the words the best 5 results share
        are searched for with BM25, and what that finds is lifted in ranks 11 onwards
        (memories that answer the question without repeating its words, but use the
        words of those that do). The first 10 never change, so ``top_k=10`` stays a
        prefix of ``top_k=50``; ``hit.breakdown.feedback`` is the lift (None in the
        first 10). ``feedback=False`` turns it off.

        Author match (docs/retrieval.md "Author match"), in hybrid mode, also for the
        results after the first 10: when the query names who wrote some of the
        memories (``metadata["author"]``, which a chat message's ``name`` fills in:
        ``{"role": "user", "name": "Dave", "content": ...}``), those are lifted ("Which
        cities did Dave travel to?" prefers what Dave said). ``hit.breakdown.author`` is
        the lift; ``authors=False`` turns it off.

        ``per_session`` (default None: off): each session's first that many results come
        first and the rest of the ranking after them, for questions that want coverage
        ("how many concerts did I go to?") more than one session's every mention. Off by
        default because it cost recall on LoCoMo, whose evidence for such
        questions often sits in one session (docs/retrieval.md "Results from many
        sessions"); scores are then shown never increasing down the list.

        Reranking (optional, docs/retrieval.md "Reranking"): with a reranker configured
        (``mindfile.open(reranker=...)``, ``mem.reranker``) the first 50 hits come back
        in its order, its score in ``hit.breakdown.rerank``; ``rerank=False`` skips it,
        ``rerank=<a reranker>`` uses that one for this call. A failing reranker leaves
        the fused order and says why in ``results.degraded``.
        """
        m = self._mindfile
        m.check_model()
        if rerank is True:
            reranker = self.reranker
        elif rerank is False:
            reranker = None
        else:
            reranker = check_reranker(rerank, "rerank")
        req = SearchRequest.build(
            query,
            session_id=session_id,
            tags=tags,
            top_k=top_k,
            mode=mode,
            fusion=fusion,
            vector_weight=vector_weight,
            fts_weight=fts_weight,
            min_score=min_score,
            query_embedding=query_embedding,
            dims=m.embedder.dimensions,
            default_weights=fusion_weights(m.embedder),
            candidates=candidates,
            user_id=user_id,
            channel=channel,
            source=source,
            as_of=as_of,
            temporal=temporal,
            preferences=preferences,
            neighbors=neighbors,
            token_match=token_match,
            feedback=feedback,
            authors=authors,
            per_session=per_session,
        )
        return run_search(m.db, m.index, m.embedder, req, m.lexical, reranker=reranker)

    def hybrid_query(self, request: MemoryHybridQueryRequest) -> SearchResults:
        """The seed's entry point: weighted hybrid search from a request object."""
        if not isinstance(request, MemoryHybridQueryRequest):
            raise InvalidInputError("request must be a MemoryHybridQueryRequest")
        return self.search(
            request.query,
            session_id=request.session_id,
            tags=request.tags,
            top_k=request.top_k,
            vector_weight=request.vector_weight,
            fts_weight=request.fts_weight,
            query_embedding=request.query_embedding,
        )
