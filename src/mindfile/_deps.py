"""What feature code needs from the engine, as protocols (the facade satisfies them).

Feature functions (``mindfile.memory.store_note(engine, ...)`` and the like) take the
engine as their first argument; typing that argument as the whole
:class:`mindfile.Mindfile` made every feature module depend on the facade that imports
it (a cycle through ``engine.py``, issue 13). They take one of these instead: the
storage seam (:class:`~mindfile.storage.stores.Stores`) and the database for
transactions, plus, for writers, the embedder and how the store chunks and indexes.
``Mindfile`` satisfies all of them structurally (mypy checks it where the facade passes
itself); a test double or another composition can too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from mindfile.context.cache import WorkingMemory
    from mindfile.embed.base import Embedder
    from mindfile.index.cache import EmbeddingCache
    from mindfile.index.chunking import ChunkSpec
    from mindfile.jobs.types import JobReport
    from mindfile.retrieve.lexical import Bm25Index
    from mindfile.retrieve.reranker import Reranker
    from mindfile.retrieve.search import SearchResults
    from mindfile.storage.backend import AnyDatabase
    from mindfile.storage.stores import Stores
    from mindfile.vector.base import VectorIndex

__all__ = [
    "ContextDeps",
    "EmbedDeps",
    "IndexDeps",
    "ReembedDeps",
    "SearchDeps",
    "StoreDeps",
    "WriteDeps",
]


class StoreDeps(Protocol):
    """Storage only: the per-aggregate stores and the database their transactions use."""

    @property
    def db(self) -> AnyDatabase: ...

    @property
    def stores(self) -> Stores: ...


class EmbedDeps(Protocol):
    """The embedder, the stores and the database (the job worker: embed outside, write
    inside)."""

    @property
    def db(self) -> AnyDatabase: ...

    @property
    def stores(self) -> Stores: ...

    @property
    def embedder(self) -> Embedder: ...


class IndexDeps(StoreDeps, EmbedDeps, Protocol):
    """The stores and the derived indexes too (reconcile checks and rebuilds them)."""

    @property
    def indexing(self) -> str: ...

    @property
    def index(self) -> VectorIndex: ...

    @property
    def lexical(self) -> Bm25Index | None: ...


class WriteDeps(StoreDeps, EmbedDeps, Protocol):
    """A writer of indexed memory: storage plus the write path's prepare stage."""

    @property
    def chunk_spec(self) -> ChunkSpec: ...

    @property
    def indexing(self) -> str: ...

    @property
    def embedding_cache(self) -> EmbeddingCache: ...

    def check_model(self) -> None:
        """Refuse to write when another process moved the store to another model."""
        ...


class ContextDeps(StoreDeps, EmbedDeps, Protocol):
    """What building a context reads: the stores, the embedder (the query vector), the
    derived indexes and the working-memory cache."""

    @property
    def index(self) -> VectorIndex: ...

    @property
    def lexical(self) -> Bm25Index | None: ...

    @property
    def working_memory(self) -> WorkingMemory: ...

    @property
    def reranker(self) -> Reranker | None: ...


class ReembedDeps(StoreDeps, EmbedDeps, Protocol):
    """Moving a store to another model: storage, the embedding cache, and switching the
    engine to the new embedder once the store has moved."""

    @property
    def indexing(self) -> str: ...

    @property
    def embedding_cache(self) -> EmbeddingCache: ...

    def _switch_embedder(self, embedder: Embedder, *, owned: bool = False) -> None:
        """Use ``embedder`` from now on (the store's model was just changed to it)."""
        ...

    def run_jobs(self) -> JobReport:
        """Embed what the switch queued (one synchronous pass)."""
        ...


class SearchDeps(Protocol):
    """The hybrid read path (notes and facts are searched like any chunk)."""

    def search(
        self,
        query: str,
        *,
        session_id: str | Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        top_k: int = 10,
    ) -> SearchResults: ...
