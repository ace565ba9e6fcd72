"""Context building: what goes into the prompt for the next model call.

:func:`build_context` (also :meth:`mindfile.Mindfile.build_context`) combines three
retrieval legs (recency, salience, relevance; docs/context.md), reranks memories by
``0.70*similarity + 0.20*recency + 0.10*importance``, removes near-duplicates and packs
the rolling summary, the memories and the latest turns into a token budget, explaining
every item. :class:`WorkingMemory` keeps each active session's latest events in process;
:func:`pack_hits` packs ranked search hits into a budget.
"""

from mindfile.context.builder import build_context
from mindfile.context.cache import WorkingMemory
from mindfile.context.packer import HIT_OVERHEAD, pack_hits
from mindfile.context.rerank import Candidate, Ranked, Reranked, recency_score, rerank
from mindfile.context.types import (
    CacheStats,
    Context,
    ContextConfig,
    ContextItem,
    ItemSource,
    RerankWeights,
)

__all__ = [
    "HIT_OVERHEAD",
    "CacheStats",
    "Candidate",
    "Context",
    "ContextConfig",
    "ContextItem",
    "ItemSource",
    "Ranked",
    "RerankWeights",
    "Reranked",
    "WorkingMemory",
    "build_context",
    "pack_hits",
    "recency_score",
    "rerank",
]
