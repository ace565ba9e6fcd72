"""Postgres implementations of the mark, LLM-failure and integrity stores, and
:func:`pg_stores`, the backend's :class:`~mindfile.storage.stores.Stores` bundle."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mindfile.storage.llm_failures import LLMFailure
from mindfile.storage.marks import EventState
from mindfile.storage.postgres.admin_stores import (
    PgEmbeddingCacheStore,
    PgMetaStore,
    PgPrivacyStore,
)
from mindfile.storage.postgres.consolidation import PgConsolidationStore
from mindfile.storage.postgres.db import PgDatabase
from mindfile.storage.postgres.jobs import PgJobStore
from mindfile.storage.postgres.manage_stores import PgLifecycleStore, PgModelStore, PgQuotaStore
from mindfile.storage.postgres.memory_stores import (
    PgEventStore,
    PgFactStore,
    PgNoteStore,
    PgSessionStateStore,
)
from mindfile.storage.postgres.sessions import PgSessionStore
from mindfile.storage.postgres.writer_lock import lock_chunk_writes
from mindfile.storage.stores import Stores

__all__ = ["PgIntegrityStore", "PgLLMFailureStore", "PgMarkStore", "pg_stores"]


def pg_stores(db: PgDatabase) -> Stores:
    """The Postgres stores over ``db`` (they share its pool and each thread's transaction)."""
    return Stores(
        sessions=PgSessionStore(db),
        events=PgEventStore(db),
        notes=PgNoteStore(db),
        facts=PgFactStore(db),
        marks=PgMarkStore(db),
        session_state=PgSessionStateStore(db),
        llm_failures=PgLLMFailureStore(db),
        integrity=PgIntegrityStore(db),
        meta=PgMetaStore(db),
        lifecycle=PgLifecycleStore(db),
        quotas=PgQuotaStore(db),
        consolidation=PgConsolidationStore(db),
        jobs=PgJobStore(db),
        privacy=PgPrivacyStore(db),
        models=PgModelStore(db),
        embedding_cache=PgEmbeddingCacheStore(db),
    )


# -- marks -------------------------------------------------------------------------------

_EVENT_CHUNKS = "SELECT chunk_rowid FROM event_chunks WHERE session_id = %s AND sequence = %s"

SET_IMPORTANCE = f"UPDATE chunks SET importance = %s WHERE id IN ({_EVENT_CHUNKS})"

SET_PINNED = f"UPDATE chunks SET pinned = %s WHERE id IN ({_EVENT_CHUNKS})"

EVENT_STATE = """
SELECT count(*), max(c.importance), max(c.pinned),
       CASE WHEN count(c.expires_at) = count(*) THEN max(c.expires_at) END,
       max(c.access_count), max(c.last_accessed_at)
FROM event_chunks AS l JOIN chunks AS c ON c.id = l.chunk_rowid
WHERE l.session_id = %s AND l.sequence = %s
"""

RESTORE_STATE = f"""
UPDATE chunks SET pinned = %s, access_count = greatest(access_count, %s),
    last_accessed_at = coalesce(%s::text, last_accessed_at)
WHERE id IN ({_EVENT_CHUNKS})
"""

RECORD_USE = """
UPDATE chunks SET
    importance = importance + %(boost)s * (1.0 - importance),
    access_count = access_count + 1,
    last_accessed_at = %(now)s
WHERE chunk_id = ANY(%(ids)s::text[])
"""


class PgMarkStore:
    """:class:`~mindfile.storage.marks.MarkStore` on ``chunks`` through ``event_chunks``."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def _changed(self, sql: str, params: Sequence[object] | dict[str, Any]) -> int:
        self.db.execute(sql, params)
        return self.db.changes()

    def set_importance(self, session_id: str, sequence: int, importance: float) -> int:
        return self._changed(SET_IMPORTANCE, (importance, session_id, sequence))

    def set_pinned(self, session_id: str, sequence: int, pinned: bool) -> int:
        return self._changed(SET_PINNED, (int(pinned), session_id, sequence))

    def record_use(self, chunk_ids: Sequence[str], now: str, boost: float) -> int:
        return self._changed(RECORD_USE, {"boost": boost, "now": now, "ids": list(chunk_ids)})

    def event_state(self, session_id: str, sequence: int) -> EventState | None:
        row = self.db.query_one(EVENT_STATE, (session_id, sequence))
        if row is None or not row[0]:
            return None
        _, importance, pinned, expires, count, used = row
        return EventState(float(importance), bool(pinned), expires, int(count), used)

    def restore_state(self, session_id: str, sequence: int, state: EventState) -> None:
        self.db.execute(
            RESTORE_STATE,
            (int(state.pinned), state.access_count, state.last_accessed_at, session_id, sequence),
        )


# -- LLM failures ------------------------------------------------------------------------

INSERT_FAILURE = """
INSERT INTO llm_failures (task, reason, message, model, scope, session_id, raw_excerpt,
                          details_json, created_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
RETURNING id
"""

LIST_FAILURES = """
SELECT id, task, reason, message, model, scope, session_id, raw_excerpt, details_json,
       created_at
FROM llm_failures
WHERE (%(task)s::text IS NULL OR task = %(task)s)
  AND (%(scope)s::text IS NULL OR scope = %(scope)s)
ORDER BY id DESC
LIMIT %(limit)s
"""


class PgLLMFailureStore:
    """:class:`~mindfile.storage.llm_failures.LLMFailureStore` on ``llm_failures``."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def record(
        self,
        *,
        task: str,
        reason: str,
        message: str,
        model: str | None,
        scope: str | None,
        session_id: str | None,
        raw_excerpt: str | None,
        details: dict[str, Any],
        created_at: str,
    ) -> int:
        # ASCII escapes: a model's lone surrogate must not make the record fail.
        blob = json.dumps(details, ensure_ascii=True, default=str)
        row = (task, reason, message, model, scope, session_id, raw_excerpt, blob, created_at)
        return int(self.db.scalar(INSERT_FAILURE, row))

    def list_failures(self, task: str | None, scope: str | None, limit: int) -> list[LLMFailure]:
        rows = self.db.query(LIST_FAILURES, {"task": task, "scope": scope, "limit": limit})
        return [
            LLMFailure(
                id=int(r[0]),
                task=str(r[1]),
                reason=str(r[2]),
                message=str(r[3]),
                model=r[4],
                scope=r[5],
                session_id=r[6],
                raw_excerpt=r[7],
                details=json.loads(r[8]),
                created_at=str(r[9]),
            )
            for r in rows
        ]

    def delete(self, ids: Sequence[int] | None, scope: str | None, session_id: str | None) -> int:
        clauses: list[str] = []
        params: list[Any] = []
        if ids is not None:
            clauses.append("id = ANY(%s::bigint[])")
            params.append(list(ids))
        for column, value in (("scope", scope), ("session_id", session_id)):
            if value is not None:
                clauses.append(f"{column} = %s")
                params.append(value)
        where = " AND ".join(clauses) or "TRUE"
        self.db.execute(f"DELETE FROM llm_failures WHERE {where}", params)
        return self.db.changes()


# -- integrity ---------------------------------------------------------------------------

UNEMBEDDED = """
SELECT c.id, j.status FROM chunks AS c
LEFT JOIN memory_jobs AS j ON j.chunk_rowid = c.id
WHERE NOT EXISTS (SELECT 1 FROM chunks_vec AS v WHERE v.chunk_rowid = c.id)
"""

BAD_VECTORS = """
SELECT v.chunk_rowid FROM chunks_vec AS v
WHERE (v.embedding_model <> %s OR vector_dims(v.embedding) <> %s)
  AND EXISTS (SELECT 1 FROM chunks AS c WHERE c.id = v.chunk_rowid)
"""

# The foreign key makes orphans impossible here; asked anyway, as the protocol says.
ORPHAN_VECTORS = """
SELECT v.chunk_rowid FROM chunks_vec AS v
WHERE NOT EXISTS (SELECT 1 FROM chunks AS c WHERE c.id = v.chunk_rowid)
"""

# The trigger on chunks_vec logs each deleted row in chunks_vec_changes.
DELETE_VECTORS = "DELETE FROM chunks_vec WHERE chunk_rowid = ANY(%s::bigint[])"

# The text index is a generated column: every chunk row has its entry.
TEXT_ROWS = "SELECT count(*) FROM chunks WHERE search_tsv IS NOT NULL"

MISSING_TEXT_ROWS = "SELECT EXISTS (SELECT 1 FROM chunks WHERE search_tsv IS NULL)"


class PgIntegrityStore:
    """:class:`~mindfile.storage.integrity.IntegrityStore` over ``chunks``, pgvector
    ``chunks_vec`` and the generated ``search_tsv`` column with its GIN index."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def unembedded(self) -> list[tuple[int, str | None]]:
        return [(int(r), status) for r, status in self.db.query(UNEMBEDDED)]

    def foreign_vectors(self, model_id: str, dimensions: int) -> list[int]:
        return [int(r[0]) for r in self.db.query(BAD_VECTORS, (model_id, dimensions))]

    def orphan_vectors(self) -> list[int]:
        return [int(r[0]) for r in self.db.query(ORPHAN_VECTORS)]

    def chunk_count(self) -> int:
        return int(self.db.scalar("SELECT count(*) FROM chunks"))

    def vector_count(self) -> int:
        return int(self.db.scalar("SELECT count(*) FROM chunks_vec"))

    def row_counts(self) -> dict[str, int]:
        return {
            table: int(self.db.scalar(f"SELECT count(*) FROM {table}"))
            for table in ("sessions", "conversation_events", "chunks", "chunks_vec")
        }

    def text_index_rows(self) -> int:
        return int(self.db.scalar(TEXT_ROWS))

    def drop_vectors(self, chunk_rowids: Sequence[int]) -> None:
        lock_chunk_writes(self.db)
        self.db.execute(DELETE_VECTORS, (list(chunk_rowids),))

    def rebuild_text_index(self) -> None:
        # search_tsv is generated and its GIN index kept by Postgres: they cannot fall
        # out of step with the text. Counts that differed were read by two statements
        # while others committed (READ COMMITTED); REINDEX then would only take an
        # ACCESS EXCLUSIVE lock under the chunk writers' lock and deadlock with readers
        # waiting for that lock. Rebuilt only if a row really lacks its vector.
        if self.db.scalar(MISSING_TEXT_ROWS):
            self.db.execute("REINDEX INDEX chunks_search")
