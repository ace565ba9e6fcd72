"""Request bodies of the HTTP API (pydantic, strict: ``"5"`` is not an integer, unknown
fields are refused). The engine validates values again with its own limits; a
violation of either is a 400 ``invalid_input``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from mindfile.retrieve.search import DEFAULT_CANDIDATES

__all__ = [
    "MAX_BATCH_EVENTS",
    "ContextConfigIn",
    "ContextIn",
    "ErrorBody",
    "ErrorDetail",
    "EventIn",
    "EventsBatch",
    "EventsBody",
    "FactIn",
    "NoteIn",
    "NoteSearchIn",
    "RerankWeightsIn",
    "ScratchpadIn",
    "SearchIn",
    "SearchWeights",
    "SingleEvent",
]

#: Events in one ``POST /v1/sessions/{id}/events`` (the body limit applies as well).
MAX_BATCH_EVENTS = 10_000


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _WriteOptions(_Body):
    agent_identity: str | None = Field(
        None, description="The agent writing (must be one of the token's agents, if listed)."
    )
    channel: str | None = Field(None, description="The session's channel (fixed once set).")
    importance: float | None = Field(None, description="In [0, 1]; default: the role's.")
    ttl: float | None = Field(None, description="Seconds until the events expire.")


class EventIn(_Body):
    """One conversation event."""

    sequence: int = Field(description="Above every sequence stored in the session before.")
    payload: Any = Field(description="A string or an OpenAI/Anthropic-shaped message.")
    metadata: dict[str, Any] | None = None
    tags: list[str] | None = None


class SingleEvent(EventIn, _WriteOptions):
    """One event, with the write options."""


class EventsBatch(_WriteOptions):
    """Several events, stored in one transaction (all or nothing)."""

    events: list[EventIn] = Field(min_length=1, max_length=MAX_BATCH_EVENTS)


def _event_shape(value: Any) -> str:
    if isinstance(value, dict):
        return "batch" if "events" in value else "single"
    return "batch" if hasattr(value, "events") else "single"


EventsBody = Annotated[
    Annotated[EventsBatch, Tag("batch")] | Annotated[SingleEvent, Tag("single")],
    Discriminator(_event_shape),
]


class SearchWeights(_Body):
    """Fusion weights; one alone makes the other its complement, none = the embedder's."""

    vector: float | None = None
    fts: float | None = None


class SearchIn(_Body):
    """``Mindfile.search``: always confined to the caller's user."""

    query: str
    session_id: str | list[str] | None = Field(
        None, description="Only these sessions (of the caller's user)."
    )
    tags: list[str] | None = None
    top_k: int = 10
    mode: Literal["hybrid", "vector", "fts"] = "hybrid"
    fusion: Literal["calibrated", "weighted", "rrf"] = "calibrated"
    weights: SearchWeights | None = None
    min_score: float | None = None
    candidates: int = DEFAULT_CANDIDATES
    channel: str | None = None
    query_embedding: list[float] | None = None
    rerank: bool = Field(
        True, description="Use the server's reranker, if it has one (mindfile serve --rerank-llm)."
    )


class RerankWeightsIn(_Body):
    """``RerankWeights``: similarity / recency / importance."""

    similarity: float = 0.70
    recency: float = 0.20
    importance: float = 0.10


class ContextConfigIn(_Body):
    """``ContextConfig``; fields left out keep their defaults (docs/context.md)."""

    recent_turns: int | None = None
    relevance_threshold: float | None = None
    salience_threshold: float | None = None
    candidate_pool: int | None = None
    max_memories: int | None = None
    max_salient: int | None = None
    memory_share: float | None = None
    lookback_days: float | None = None
    half_life_days: float | None = None
    weights: RerankWeightsIn | None = None
    near_duplicate: float | None = None
    cross_session: bool | None = None
    lexical_k: int | None = None
    rerank: bool | None = Field(
        None, description="Use the server's reranker, if it has one (default: yes)."
    )


class ContextIn(_Body):
    """``Mindfile.build_context`` for the caller's user."""

    session_id: str
    query: str
    token_budget: int
    agent_identity: str | None = None
    channel: str | None = None
    system_prompt: str | None = None
    tools: list[dict[str, Any]] | None = None
    reserve_system: int = 0
    reserve_tools: int = 0
    config: ContextConfigIn | None = None
    query_embedding: list[float] | None = None


class NoteIn(_Body):
    """A note of the caller's user (``memory:{user}``); an existing id is replaced."""

    content: str
    tags: list[str] | None = None
    source: str | None = None
    importance: float | None = None
    ttl: float | None = Field(None, description="Seconds until the note expires.")


class FilesSearchIn(_Body):
    """Search the store's synced files (docs/files.md); ``path`` is a glob."""

    query: str
    path: str | None = None
    top_k: int = 5


class NoteSearchIn(_Body):
    """Hybrid search over the caller's notes (and facts)."""

    query: str
    tags: list[str] | None = None
    top_k: int = 10
    include_facts: bool = True


class FactIn(_Body):
    """A fact of the caller's user; the previous value moves to the history."""

    value: str
    source: Literal["agent", "user"] = "agent"


class ScratchpadIn(_Body):
    """The whole scratchpad (at most 32 items of at most 240 characters)."""

    items: list[str]


class ErrorDetail(BaseModel):
    """``code`` is stable (``mindfile.errors`` plus the HTTP layer's); ``message`` is for
    people."""

    code: str
    message: str


class ErrorBody(BaseModel):
    """Every error response."""

    error: ErrorDetail
