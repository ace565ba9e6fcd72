"""The storage seam: one object holding a backend's per-aggregate stores.

Feature code (:mod:`mindfile.memory`, :mod:`mindfile.llm`, ...) reads and writes its
tables only through these stores; each is a :class:`typing.Protocol` with plain Python
values in and out, so a second backend (Postgres) implements the protocols and the
features do not change. :func:`sqlite_stores` builds the SQLite implementations over one
:class:`~mindfile.storage.db.Database`. Transactions stay the database's
(``db.atomic()``): a store method runs inside the caller's transaction when one is
open, and opens its own (a savepoint when nested) when it writes several rows.

What is not behind the seam yet is listed in docs/architecture.md ("Storage seam").
"""

from __future__ import annotations

from dataclasses import dataclass

from mindfile.storage.consolidation import ConsolidationStore, SqliteConsolidationStore
from mindfile.storage.db import Database
from mindfile.storage.embedding_cache import EmbeddingCacheStore, SqliteEmbeddingCacheStore
from mindfile.storage.events import EventStore, SqliteEventStore
from mindfile.storage.facts import FactStore, SqliteFactStore
from mindfile.storage.integrity import IntegrityStore, SqliteIntegrityStore
from mindfile.storage.jobs import JobStore, SqliteJobStore
from mindfile.storage.lifecycle import LifecycleStore, SqliteLifecycleStore
from mindfile.storage.llm_failures import LLMFailureStore, SqliteLLMFailureStore
from mindfile.storage.marks import MarkStore, SqliteMarkStore
from mindfile.storage.meta import MetaStore, SqliteMetaStore
from mindfile.storage.models import ModelStore, SqliteModelStore
from mindfile.storage.notes import NoteStore, SqliteNoteStore
from mindfile.storage.privacy import PrivacyStore, SqlitePrivacyStore
from mindfile.storage.quotas import QuotaStore, SqliteQuotaStore
from mindfile.storage.session_state import SessionStateStore, SqliteSessionStateStore
from mindfile.storage.sessions import SessionStore, SqliteSessionStore

__all__ = ["Stores", "sqlite_stores"]


@dataclass(frozen=True)
class Stores:
    """A backend's stores, one per aggregate."""

    sessions: SessionStore
    events: EventStore
    notes: NoteStore
    facts: FactStore
    marks: MarkStore
    session_state: SessionStateStore
    llm_failures: LLMFailureStore
    integrity: IntegrityStore
    meta: MetaStore
    lifecycle: LifecycleStore
    quotas: QuotaStore
    consolidation: ConsolidationStore
    jobs: JobStore
    privacy: PrivacyStore
    models: ModelStore
    embedding_cache: EmbeddingCacheStore


def sqlite_stores(db: Database) -> Stores:
    """The SQLite stores over ``db`` (they share its connection, lock and transactions)."""
    return Stores(
        sessions=SqliteSessionStore(db),
        events=SqliteEventStore(db),
        notes=SqliteNoteStore(db),
        facts=SqliteFactStore(db),
        marks=SqliteMarkStore(db),
        session_state=SqliteSessionStateStore(db),
        llm_failures=SqliteLLMFailureStore(db),
        integrity=SqliteIntegrityStore(db),
        meta=SqliteMetaStore(db),
        lifecycle=SqliteLifecycleStore(db),
        quotas=SqliteQuotaStore(db),
        consolidation=SqliteConsolidationStore(db),
        jobs=SqliteJobStore(db),
        privacy=SqlitePrivacyStore(db),
        models=SqliteModelStore(db),
        embedding_cache=SqliteEmbeddingCacheStore(db),
    )
