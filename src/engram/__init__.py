"""Engram: local-first long-term memory for LLM agents in one SQLite file.

>>> import engram
>>> with engram.open(":memory:", embedder="hash") as mem:
...     _ = mem.store("s1", 1, {"role": "user", "content": "I moved to Lisbon in May."})
...     [hit.text for hit in mem.search("Lisbon", top_k=1)]
['I moved to Lisbon in May.']
"""

from engram.context import CacheStats, Context, ContextConfig, ContextItem, RerankWeights
from engram.embed import Embedder, HashEmbedder, StaticEmbedder, register_embedder
from engram.engine import Engram, open
from engram.errors import (
    BackendUnavailableError,
    ConfigError,
    ConflictError,
    EmbeddingError,
    EngramError,
    InvalidInputError,
    LimitExceededError,
    LLMError,
    NotFoundError,
    SchemaError,
    StorageError,
)
from engram.manage import (
    ConsolidationRecord,
    ConsolidationReport,
    DecayPolicy,
    Quota,
    QuotaUsage,
    SweepResult,
)
from engram.memory import (
    Fact,
    FactVersion,
    MemoryHit,
    Note,
    ScratchpadState,
    SummaryConfig,
    SummaryContext,
    SummaryState,
    SummaryWriteOutcome,
)
from engram.retrieve.search import SearchResults
from engram.types import (
    MemoryHybridQueryRequest,
    MemoryHybridQueryResult,
    MemoryRecord,
    ScoreBreakdown,
    SearchHit,
    SessionInfo,
    StoreInfo,
)

__version__ = "0.1.0"

__all__ = [
    "BackendUnavailableError",
    "CacheStats",
    "ConfigError",
    "ConflictError",
    "ConsolidationRecord",
    "ConsolidationReport",
    "Context",
    "ContextConfig",
    "ContextItem",
    "DecayPolicy",
    "Embedder",
    "EmbeddingError",
    "Engram",
    "EngramError",
    "Fact",
    "FactVersion",
    "HashEmbedder",
    "InvalidInputError",
    "LLMError",
    "LimitExceededError",
    "MemoryHit",
    "MemoryHybridQueryRequest",
    "MemoryHybridQueryResult",
    "MemoryRecord",
    "NotFoundError",
    "Note",
    "Quota",
    "QuotaUsage",
    "RerankWeights",
    "SchemaError",
    "ScoreBreakdown",
    "ScratchpadState",
    "SearchHit",
    "SearchResults",
    "SessionInfo",
    "StaticEmbedder",
    "StorageError",
    "StoreInfo",
    "SummaryConfig",
    "SummaryContext",
    "SummaryState",
    "SummaryWriteOutcome",
    "SweepResult",
    "__version__",
    "open",
    "register_embedder",
]
