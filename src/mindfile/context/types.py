"""Value types of the context builder: frozen, row-major dataclasses with ``to_dict()``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mindfile.errors import ConfigError

__all__ = [
    "CacheStats",
    "Context",
    "ContextConfig",
    "ContextItem",
    "ItemSource",
    "RerankWeights",
]

#: Where a context item came from.
ItemSource = Literal["summary", "memory", "recent", "salient"]


def _finite(value: float, what: str, *, low: float = 0.0, high: float = math.inf) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise ConfigError(f"{what} must be a finite number in [{low}, {high}], not {value!r}")


def _count(value: int, what: str, *, low: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{what} must be an integer >= {low}, not {value!r}")


@dataclass(frozen=True, slots=True)
class RerankWeights:
    """``final = similarity*s + recency*r + importance*i`` (the seed's 0.70/0.20/0.10).

    Weights are non-negative and not all zero; they need not sum to 1 (scores then range
    over ``[0, sum]``).
    """

    similarity: float = 0.70
    recency: float = 0.20
    importance: float = 0.10

    def __post_init__(self) -> None:
        for name in ("similarity", "recency", "importance"):
            _finite(getattr(self, name), f"weights.{name}")
        if self.similarity + self.recency + self.importance <= 0:
            raise ConfigError("at least one rerank weight must be positive")

    def to_dict(self) -> dict[str, float]:
        """The three weights."""
        return {
            "similarity": self.similarity,
            "recency": self.recency,
            "importance": self.importance,
        }


@dataclass(frozen=True, slots=True)
class ContextConfig:
    """The knobs of :func:`mindfile.context.build_context` (defaults from the seeds).

    - ``recent_turns``: the recency leg, the last N events of the session (10).
    - ``relevance_threshold``: cosine similarity a chunk needs to enter by relevance
      (0.655; see docs/context.md for what it does with the bundled model).
    - ``salience_threshold``: importance at or above which a chunk is salient (0.85);
      pinned chunks are always salient.
    - ``candidate_pool``: how many nearest chunks the vector leg fetches (20).
    - ``max_memories`` / ``max_salient``: how many memories at most (``None``, the
      default: as many as the budget holds), of which salient ones at most
      ``max_salient`` (4).
    - ``memory_share``: the share of the budget left after the summary that memories may
      use before the latest turns are packed (0.40); what either side leaves flows to
      the other.
    - ``lookback_days``: conversation chunks older than this are not recalled (90;
      ``None`` = no limit). Notes and facts are exempt.
    - ``half_life_days``: recency = ``0.5 ** (age / half_life)`` (7 days).
    - ``weights``: the rerank weights.
    - ``near_duplicate``: cosine between two candidates at or above which the lower-ranked
      one is dropped (0.95); equal content hashes are always duplicates.
    - ``cross_session``: recall from the agent's other sessions (True).
    - ``lexical_k``: also admit the top k BM25 hits (a lexical relevance leg) whatever
      their cosine (5; 0 = off, the seed's three legs only). On by default because the
      bundled static model's cosines alone let through only ~20% of LoCoMo evidence at
      0.655 (docs/context.md).
    - ``hybrid``: also admit the best of ``search``'s own ranking (vector and BM25 fused
      with the embedder's weights), as many as the budget could hold, and rank every
      memory on that fused relevance instead of the raw cosine (True; False = the seed's
      cosine ranking).
    - ``token_match``: rerank that hybrid ranking's best candidates by token match, as
      ``search`` does with the bundled model (True; docs/retrieval.md "Token match").
    - ``feedback``: lift, after that ranking's first ten, what the best results' shared
      words find, as ``search`` does for more than ten results (True; docs/retrieval.md
      "Feedback"). Memories it lifts rank at most as relevant as the tenth.
    - ``authors``: lift, after that ranking's first ten, what the authors the query
      names wrote (``metadata["author"]``), as ``search`` does for more than ten
      results (True; docs/retrieval.md "Author match"), scaled as feedback's lifts are.
    - ``preferences``: for a recommendation question ("can you recommend ...?"), run the
      hybrid ranking as ``search`` does for one: the legs search the question's topic,
      and the user's statements about themselves (preferences, habits, possessions)
      join and are lifted (True, with ``hybrid``; docs/retrieval.md "Preference recall").
    - ``rerank``: with a reranker configured (``mindfile.open(reranker=...)``), let it
      order the hybrid ranking's best 50 before the budget admits them, as ``search``
      does (True; docs/retrieval.md "Reranking"). A failure keeps the fused order and
      says why in ``Context.degraded``.
    - ``include_files``: also recall chunks of synced files (:meth:`mindfile.Mindfile.sync`;
      False). Files belong to the store, not to a user, and have no lookback limit.
    - ``group_by_session``: the memories message groups memories by session, sessions
      oldest first under a header with their dates, each session's memories in their
      order, the user's notes and facts in their own group (True; False = one line per
      memory in relevance order, each naming its session). ``Context.items`` keep the
      relevance order and the reasons either way.
    """

    recent_turns: int = 10
    relevance_threshold: float = 0.655
    salience_threshold: float = 0.85
    candidate_pool: int = 20
    max_memories: int | None = None
    max_salient: int = 4
    memory_share: float = 0.40
    lookback_days: float | None = 90.0
    half_life_days: float = 7.0
    weights: RerankWeights = field(default_factory=RerankWeights)
    near_duplicate: float = 0.95
    cross_session: bool = True
    lexical_k: int = 5
    hybrid: bool = True
    hybrid_floor: float = 0.3
    token_match: bool = True
    feedback: bool = True
    authors: bool = True
    preferences: bool = True
    rerank: bool = True
    include_files: bool = False
    group_by_session: bool = True

    def __post_init__(self) -> None:
        _count(self.recent_turns, "recent_turns")
        _count(self.candidate_pool, "candidate_pool")
        if self.max_memories is not None:
            _count(self.max_memories, "max_memories")
        _count(self.max_salient, "max_salient")
        _count(self.lexical_k, "lexical_k")
        _finite(self.relevance_threshold, "relevance_threshold", low=-1.0, high=1.0)
        _finite(self.salience_threshold, "salience_threshold", high=1.0)
        _finite(self.memory_share, "memory_share", high=1.0)
        _finite(self.near_duplicate, "near_duplicate", low=-1.0, high=1.0)
        _finite(self.hybrid_floor, "hybrid_floor", low=-1.0, high=1.0)
        if self.lookback_days is not None:
            _finite(self.lookback_days, "lookback_days")
        _finite(self.half_life_days, "half_life_days")
        if self.half_life_days <= 0:
            raise ConfigError("half_life_days must be positive")
        if not isinstance(self.weights, RerankWeights):
            raise ConfigError("weights must be a RerankWeights")
        if not isinstance(self.cross_session, bool):
            raise ConfigError("cross_session must be a bool")
        if not isinstance(self.include_files, bool):
            raise ConfigError("include_files must be a bool")
        if not isinstance(self.hybrid, bool):
            raise ConfigError("hybrid must be a bool")
        if not isinstance(self.token_match, bool):
            raise ConfigError("token_match must be a bool")
        if not isinstance(self.feedback, bool):
            raise ConfigError("feedback must be a bool")
        if not isinstance(self.authors, bool):
            raise ConfigError("authors must be a bool")
        if not isinstance(self.preferences, bool):
            raise ConfigError("preferences must be a bool")
        if not isinstance(self.rerank, bool):
            raise ConfigError("rerank must be a bool")
        if not isinstance(self.group_by_session, bool):
            raise ConfigError("group_by_session must be a bool")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the settings."""
        return {
            "recent_turns": self.recent_turns,
            "relevance_threshold": self.relevance_threshold,
            "salience_threshold": self.salience_threshold,
            "candidate_pool": self.candidate_pool,
            "max_memories": self.max_memories,
            "max_salient": self.max_salient,
            "memory_share": self.memory_share,
            "lookback_days": self.lookback_days,
            "half_life_days": self.half_life_days,
            "weights": self.weights.to_dict(),
            "near_duplicate": self.near_duplicate,
            "cross_session": self.cross_session,
            "lexical_k": self.lexical_k,
            "hybrid": self.hybrid,
            "hybrid_floor": self.hybrid_floor,
            "token_match": self.token_match,
            "feedback": self.feedback,
            "authors": self.authors,
            "preferences": self.preferences,
            "rerank": self.rerank,
            "include_files": self.include_files,
            "group_by_session": self.group_by_session,
        }


@dataclass(frozen=True, slots=True)
class ContextItem:
    """One thing the builder put in the context (or left out, in ``Context.dropped``).

    ``reason`` is a human-readable why (or why not). ``tokens`` is what it costs in the
    prompt: for memories, the growth of the memories message when it was added, in rank
    order (the first carries the message's header and framing; the middle ones are
    counted as their line plus its newline, plus their session group's header when they
    open one, the last takes the remainder), so the items' tokens
    sum exactly to the context's. ``sequence`` is the event's sequence for turns and
    the chunk's last event for memories. ``explain`` holds the rerank terms for memories.
    """

    source: ItemSource
    reason: str
    tokens: int
    session_id: str
    text: str
    sequence: int | None = None
    chunk_id: str | None = None
    created_at: str | None = None
    score: float | None = None
    explain: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the fields."""
        return {
            "source": self.source,
            "reason": self.reason,
            "tokens": self.tokens,
            "session_id": self.session_id,
            "sequence": self.sequence,
            "chunk_id": self.chunk_id,
            "created_at": self.created_at,
            "score": self.score,
            "text": self.text,
            "explain": dict(self.explain),
        }


@dataclass(frozen=True, slots=True)
class Context:
    """A prompt context built for one turn of a session.

    ``messages`` are OpenAI-style chat messages, in order: the system prompt (when
    given), the rolling summary, the relevant memories, the latest turns. ``tokens`` is
    what they cost plus the reservation for system prompt and tools (``reserved``), and
    is never above ``budget``. ``items`` says why each part is there, in output order;
    ``dropped`` what was considered and left out, and why. ``degraded`` explains a
    missing leg (e.g. the embedder failed, so there is no relevance leg).
    """

    session_id: str
    query: str
    messages: tuple[dict[str, Any], ...]
    tokens: int
    budget: int
    reserved: int
    items: tuple[ContextItem, ...]
    dropped: tuple[ContextItem, ...] = ()
    degraded: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the fields."""
        return {
            "session_id": self.session_id,
            "query": self.query,
            "messages": [dict(m) for m in self.messages],
            "tokens": self.tokens,
            "budget": self.budget,
            "reserved": self.reserved,
            "items": [i.to_dict() for i in self.items],
            "dropped": [i.to_dict() for i in self.dropped],
            "degraded": self.degraded,
        }


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Counters of the working-memory cache.

    ``hits`` were served with no query at all (nothing changed since the last check);
    ``validated`` after one aggregate query showed the session unchanged; ``refreshed``
    fetched only new events; ``loads`` read the tail from disk (first use, or a change
    the cache could not patch); ``bypassed`` asked for more than the cache holds.
    """

    hits: int
    validated: int
    refreshed: int
    loads: int
    bypassed: int
    sessions: int
    capacity: int

    def to_dict(self) -> dict[str, int]:
        """The counters."""
        return {
            "hits": self.hits,
            "validated": self.validated,
            "refreshed": self.refreshed,
            "loads": self.loads,
            "bypassed": self.bypassed,
            "sessions": self.sessions,
            "capacity": self.capacity,
        }
