"""Engram: local-first long-term memory for LLM agents in one SQLite file.

>>> import engram
>>> with engram.open(":memory:", embedder="hash") as mem:
...     _ = mem.store("s1", 1, {"role": "user", "content": "I moved to Lisbon in May."})
...     [hit.text for hit in mem.search("Lisbon", top_k=1)]
['I moved to Lisbon in May.']
"""

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
    NotFoundError,
    SchemaError,
    StorageError,
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
    "ConfigError",
    "ConflictError",
    "EmbeddingError",
    "Embedder",
    "Engram",
    "EngramError",
    "HashEmbedder",
    "InvalidInputError",
    "LimitExceededError",
    "MemoryHybridQueryRequest",
    "MemoryHybridQueryResult",
    "MemoryRecord",
    "NotFoundError",
    "SchemaError",
    "ScoreBreakdown",
    "SearchHit",
    "SearchResults",
    "SessionInfo",
    "StaticEmbedder",
    "StorageError",
    "StoreInfo",
    "__version__",
    "open",
    "register_embedder",
]
