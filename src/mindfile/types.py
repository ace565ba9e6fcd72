"""Mindfile's public value types: frozen, row-major dataclasses with ``to_dict()``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = [
    "EmbeddingCacheStats",
    "FusionMode",
    "MemoryHybridQueryRequest",
    "MemoryHybridQueryResult",
    "MemoryRecord",
    "ScoreBreakdown",
    "SearchHit",
    "SearchMode",
    "SessionInfo",
    "StoreInfo",
    "StoreStatus",
]

SearchMode = Literal["hybrid", "vector", "fts"]
FusionMode = Literal["calibrated", "weighted", "rrf"]


class _ToDict:
    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the fields."""
        return asdict(self)  # type: ignore[call-overload,no-any-return]


@dataclass(frozen=True, slots=True)
class MemoryRecord(_ToDict):
    """One stored conversation event."""

    session_id: str
    sequence: int
    payload: Any
    created_at: str
    #: When it happened, as given to ``store(occurred_at=...)``; else ``created_at``.
    occurred_at: str | None = None


@dataclass(frozen=True, slots=True)
class SessionInfo(_ToDict):
    """A session, as listed by :meth:`mindfile.Mindfile.list_sessions`.

    ``last_sequence`` is the highest sequence ever stored in the session (-1: none),
    which deleting events never lowers; ``event_count`` counts the events still stored.
    """

    session_id: str
    agent_identity: str | None
    created_at: str
    updated_at: str
    last_sequence: int
    event_count: int
    user_id: str | None = None
    channel: str | None = None


@dataclass(frozen=True, slots=True)
class ScoreBreakdown(_ToDict):
    """How a hit's score was made.

    ``vector`` is the cosine similarity and ``fts`` the BM25 score (higher is better),
    each ``None`` when that leg did not return the chunk; ``vector_norm``/``fts_norm``
    are the per-leg values after normalisation (calibrated or min-max, weighted fusions:
    ``fused = vector_weight * vector_norm + fts_weight * fts_norm + time``) or the RRF
    contributions (RRF fusion: ``fused = vector_norm + fts_norm + time``); ``fused`` is
    the final score.

    ``time`` is what the query's time expressions added (``search(as_of=...)``,
    docs/retrieval.md "Time-aware retrieval"): None when the query has none, else the
    boost included in ``fused``.

    ``preference`` is what a recommendation question added to a memory that states a
    preference, habit, possession or constraint (docs/retrieval.md "Preference recall"):
    None when the query asks for no recommendation, else the boost included in ``fused``.

    ``neighbors`` is what neighbouring turns of the same conversation added (a memory
    within two turns of a strong match climbs; docs/retrieval.md "Neighbour
    smoothing"): None when turned off (``search(neighbors=False)``) or in a single-leg
    mode, else the lift included in ``fused``.

    ``token_match`` is what the hit's closest word pieces added (the best candidates
    reranked in the bundled model's token space, docs/retrieval.md "Token match"): None
    when it did not run (``search(token_match=False)``, a single-leg mode, RRF fusion,
    an embedder that does not recommend it), else the lift included in ``fused``.

    ``feedback`` is what the feedback pass added (the words the best five results share,
    searched for with BM25; docs/retrieval.md "Feedback"): None in the first 10 results,
    which it never changes, and when it did not run (``search(feedback=False)``,
    ``top_k`` of 10 or less, a single-leg mode, RRF fusion, no BM25 index ready), else
    the lift included in ``fused``.

    ``author`` is what author match added (the query names who wrote the memory,
    ``metadata["author"]``; docs/retrieval.md "Author match"): None in the first 10
    results, which it never changes, and when it did not run (``search(authors=False)``,
    ``top_k`` of 10 or less, a single-leg mode, RRF fusion), else the lift included in
    ``fused`` (0.0 for a memory whose author the query does not name).

    ``rerank`` is the configured reranker's score (an LLM, a cross-encoder;
    docs/retrieval.md "Reranking"): None when none ran or the hit was past the first 50;
    the hits it scored are ordered by it, ``fused`` unchanged.
    """

    vector: float | None
    fts: float | None
    vector_norm: float
    fts_norm: float
    fused: float
    vector_rank: int | None = None
    fts_rank: int | None = None
    time: float | None = None
    preference: float | None = None
    neighbors: float | None = None
    token_match: float | None = None
    feedback: float | None = None
    rerank: float | None = None
    author: float | None = None


@dataclass(frozen=True, slots=True)
class SearchHit(_ToDict):
    """One retrieved chunk."""

    chunk_id: str
    session_id: str
    text: str
    sequence_start: int
    sequence_end: int
    metadata: dict[str, Any]
    score: float
    breakdown: ScoreBreakdown
    #: When the memory happened (ISO-8601 UTC): the event's ``occurred_at``, else when it
    #: was stored.
    occurred_at: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryHybridQueryRequest(_ToDict):
    """The seed's request shape for :meth:`mindfile.Mindfile.hybrid_query`."""

    session_id: str | Sequence[str] | None
    query: str
    tags: Sequence[str] | None = None
    query_embedding: Sequence[float] | None = None
    top_k: int = 10
    #: None: the embedder's recommended weights (see :meth:`mindfile.Mindfile.search`).
    vector_weight: float | None = None
    fts_weight: float | None = None


#: The seed's name for a hybrid hit.
MemoryHybridQueryResult = SearchHit


@dataclass(frozen=True, slots=True)
class StoreStatus(_ToDict):
    """:meth:`mindfile.Mindfile.status`: ``ready``, ``syncing``, ``closed`` or ``error``."""

    state: Literal["ready", "syncing", "closed", "error"]
    error: str | None = None


@dataclass(frozen=True, slots=True)
class EmbeddingCacheStats(_ToDict):
    """What :meth:`mindfile.Mindfile.embedding_cache_stats` reports.

    ``entries``/``bytes``/``models`` describe the table (every model in it);
    ``hits``/``misses`` count texts looked up by this process since the store was opened
    (``hit_rate`` = hits / (hits + misses), None before any lookup).
    """

    enabled: bool
    entries: int
    bytes: int
    models: dict[str, int]
    hits: int
    misses: int
    max_entries: int | None
    oldest_used_at: str | None

    @property
    def hit_rate(self) -> float | None:
        looked = self.hits + self.misses
        return None if looked == 0 else self.hits / looked

    def to_dict(self) -> dict[str, Any]:
        """The fields plus ``hit_rate``."""
        return {**asdict(self), "hit_rate": self.hit_rate}


@dataclass(frozen=True, slots=True)
class StoreInfo(_ToDict):
    """What ``mindfile info`` prints."""

    path: str
    schema_version: int
    embedding_model: str
    dimensions: int
    vector_index: str
    sessions: int
    events: int
    chunks: int
    vectors: int
    size_bytes: int
    extra: dict[str, Any] = field(default_factory=dict)
