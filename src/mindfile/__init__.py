"""Mindfile: local-first long-term memory for LLM agents in one SQLite file.

>>> import mindfile
>>> with mindfile.open(":memory:", embedder="hash") as mem:
...     _ = mem.store("s1", 1, {"role": "user", "content": "I moved to Lisbon in May."})
...     [hit.text for hit in mem.search("Lisbon", top_k=1)]
['I moved to Lisbon in May.']
"""

from mindfile.agents import AgentStores, agents
from mindfile.aio import AsyncMindfile, aopen
from mindfile.context import CacheStats, Context, ContextConfig, ContextItem, RerankWeights
from mindfile.embed import Embedder, HashEmbedder, StaticEmbedder, register_embedder
from mindfile.engine import Mindfile, open
from mindfile.errors import (
    BackendUnavailableError,
    ConfigError,
    ConflictError,
    DatabaseConnectionError,
    EmbeddingError,
    InvalidInputError,
    InvalidTimeError,
    LimitExceededError,
    LLMError,
    MindfileError,
    NotFoundError,
    ReadOnlyError,
    SchemaError,
    ScopeError,
    StorageError,
    UnsupportedBackendError,
)
from mindfile.files import SyncReport
from mindfile.manage import (
    ConsolidationRecord,
    ConsolidationReport,
    DecayPolicy,
    Quota,
    QuotaUsage,
    SweepResult,
)
from mindfile.memory import (
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
from mindfile.retrieve.search import SearchResults
from mindfile.types import (
    EmbeddingCacheStats,
    MemoryHybridQueryRequest,
    MemoryHybridQueryResult,
    MemoryRecord,
    ScoreBreakdown,
    SearchHit,
    SessionInfo,
    StoreInfo,
    StoreStatus,
)

__version__ = "0.2.0"

__all__ = [
    "AgentStores",
    "AsyncMindfile",
    "BackendUnavailableError",
    "CacheStats",
    "ConfigError",
    "ConflictError",
    "ConsolidationRecord",
    "ConsolidationReport",
    "Context",
    "ContextConfig",
    "ContextItem",
    "DatabaseConnectionError",
    "DecayPolicy",
    "Embedder",
    "EmbeddingCacheStats",
    "EmbeddingError",
    "Fact",
    "FactVersion",
    "HashEmbedder",
    "InvalidInputError",
    "InvalidTimeError",
    "LLMError",
    "LimitExceededError",
    "MemoryHit",
    "MemoryHybridQueryRequest",
    "MemoryHybridQueryResult",
    "MemoryRecord",
    "Mindfile",
    "MindfileError",
    "NotFoundError",
    "Note",
    "Quota",
    "QuotaUsage",
    "ReadOnlyError",
    "RerankWeights",
    "SchemaError",
    "ScopeError",
    "ScoreBreakdown",
    "ScratchpadState",
    "SearchHit",
    "SearchResults",
    "SessionInfo",
    "StaticEmbedder",
    "StorageError",
    "StoreInfo",
    "StoreStatus",
    "SummaryConfig",
    "SummaryContext",
    "SummaryState",
    "SummaryWriteOutcome",
    "SweepResult",
    "SyncReport",
    "UnsupportedBackendError",
    "__version__",
    "agents",
    "aopen",
    "open",
    "register_embedder",
]
