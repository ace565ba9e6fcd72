"""The search store: what the read path reads besides its derived indexes.

:mod:`mindfile.retrieve` ranks (fusion, degraded search, the time boost); this store
reads the rows those rules need: the embedding backlog, which candidates still lack a
vector, chunk times, and the chunk ids a read filter allows. The read path itself stays
on the :class:`~mindfile.storage.db.Database` (a read filter's extra condition is SQL on
``chunks AS c``; its full-text leg is :mod:`mindfile.storage.fulltext`;
docs/architecture.md, "Storage seam").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from mindfile.storage.db import Database

__all__ = ["SearchStore", "SqliteSearchStore"]


class SearchStore(Protocol):
    """Reads of the search path (backend-neutral but for :meth:`rowids_where`)."""

    def backlog(self, cap: int) -> tuple[int, int, int] | None:
        """``(pending, running, failed)`` embedding jobs, each counted up to ``cap``;
        None when there are none (the cheap check every search makes)."""
        ...

    def unembedded_among(self, rowids: Sequence[int]) -> list[int]:
        """Those of ``rowids`` that have no vector."""
        ...

    def chunk_times(self, rowids: Sequence[int]) -> list[tuple[int, str]]:
        """``(rowid, occurred_at or created_at)`` of the chunks that exist."""
        ...

    def chunk_statements(self, rowids: Sequence[int]) -> list[tuple[int, str, str]]:
        """``(rowid, chunk_text, metadata_json)`` of those chunks that exist, for the
        preference detector."""
        ...

    def statements_after(self, rowid: int, limit: int) -> list[tuple[int, str, str]]:
        """:meth:`chunk_statements` of the first ``limit`` chunks above ``rowid``, by
        rowid."""
        ...

    def rowids_where(self, condition: str, params: Sequence[Any]) -> list[int]:
        """Rowids of the chunks matching a read filter's SQL condition (``" AND ..."``
        on ``chunks AS c``)."""
        ...


# status IN (...) uses idx_jobs_status_next: three index probes, however many done jobs.
HAS_BACKLOG = """
SELECT EXISTS (SELECT 1 FROM memory_jobs WHERE status IN ('pending', 'running', 'failed'))
"""

BACKLOG = """
SELECT
    (SELECT count(*) FROM (SELECT 1 FROM memory_jobs WHERE status = 'pending' LIMIT ?1)),
    (SELECT count(*) FROM (SELECT 1 FROM memory_jobs WHERE status = 'running' LIMIT ?1)),
    (SELECT count(*) FROM (SELECT 1 FROM memory_jobs WHERE status = 'failed' LIMIT ?1))
"""

UNEMBEDDED_AMONG = """
SELECT value FROM json_each(?)
WHERE NOT EXISTS (SELECT 1 FROM chunks_vec WHERE chunk_rowid = value)
"""

TIMES = """
SELECT id, coalesce(occurred_at, created_at) FROM chunks
WHERE id IN (SELECT value FROM json_each(?))
"""

STATEMENTS = """
SELECT id, chunk_text, metadata_json FROM chunks
WHERE id IN (SELECT value FROM json_each(?))
"""

STATEMENTS_AFTER = """
SELECT id, chunk_text, metadata_json FROM chunks WHERE id > ? ORDER BY id LIMIT ?
"""

ROWIDS_WHERE = "SELECT c.id FROM chunks AS c WHERE 1{condition}"


class SqliteSearchStore:
    """:class:`SearchStore` on ``memory_jobs``, ``chunks`` and ``chunks_vec``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def backlog(self, cap: int) -> tuple[int, int, int] | None:
        if not self.db.scalar(HAS_BACKLOG):
            return None
        row = self.db.query_one(BACKLOG, (cap,))
        if row is None:
            return (0, 0, 0)
        pending, running, failed = (int(n) for n in row)
        return pending, running, failed

    def unembedded_among(self, rowids: Sequence[int]) -> list[int]:
        return [int(r[0]) for r in self.db.query(UNEMBEDDED_AMONG, (json.dumps(list(rowids)),))]

    def chunk_times(self, rowids: Sequence[int]) -> list[tuple[int, str]]:
        rows = self.db.query(TIMES, (json.dumps(list(rowids)),))
        return [(int(rowid), str(text)) for rowid, text in rows]

    def chunk_statements(self, rowids: Sequence[int]) -> list[tuple[int, str, str]]:
        rows = self.db.query(STATEMENTS, (json.dumps(list(rowids)),))
        return [(int(r), str(t), str(m)) for r, t, m in rows]

    def statements_after(self, rowid: int, limit: int) -> list[tuple[int, str, str]]:
        rows = self.db.query(STATEMENTS_AFTER, (rowid, limit))
        return [(int(r), str(t), str(m)) for r, t, m in rows]

    def rowids_where(self, condition: str, params: Sequence[Any]) -> list[int]:
        rows = self.db.query(ROWIDS_WHERE.format(condition=condition), list(params))
        return [int(r[0]) for r in rows]
