"""The recall store: what the context builder's memory legs read (mindfile.context).

:mod:`mindfile.context.retrieval` decides the scope of a context (whose sessions, which
namespaces, the lookback and channel rules; documented there) and ranks; this module
turns a :class:`Scope` into a condition on chunks and reads the rows. The relevance and
lexical legs run through the read path (:class:`~mindfile.retrieve.retriever.Retriever`),
which takes the same condition.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mindfile.storage.db import Database

__all__ = ["CandidateRow", "RecallStore", "Scope", "SqliteRecallStore"]


@dataclass(frozen=True, slots=True)
class Scope:
    """Which chunks a context may recall (the rules: :mod:`mindfile.context.retrieval`)."""

    session_id: str
    user_id: str | None
    agent_identity: str | None
    cross_session: bool
    namespaces: tuple[str, ...]
    channel: str | None
    cutoff: str | None
    now: str
    recent_from: int | None
    include_files: bool = False

    def where(self, *, lookback: bool = True) -> tuple[str, list[Any]]:
        """A SQL condition on ``chunks AS c`` and its parameters."""
        cutoff = self.cutoff if lookback else None
        current = "c.session_id = ?"
        params: list[Any] = [self.now, self.session_id]
        if self.recent_from is not None:
            current += " AND c.sequence_end < ?"
            params.append(self.recent_from)
        if cutoff is not None:
            current += " AND c.created_at >= ?"
            params.append(cutoff)
        parts = [f"({current})"]
        others = self._other_sessions()
        if others is not None:
            sessions_sql, sessions_params = others
            other = f"c.session_id IN ({sessions_sql})"
            params += sessions_params
            if cutoff is not None:
                other += " AND c.created_at >= ?"
                params.append(cutoff)
            if self.channel is not None:
                other += (
                    " AND (c.session_id IN (SELECT session_id FROM sessions WHERE channel = ?)"
                    " OR (c.session_id IN (SELECT session_id FROM sessions WHERE channel IS NULL)"
                    " AND json_extract(c.metadata_json, '$.channel') = ?))"
                )
                params += [self.channel, self.channel]
            parts.append(f"({other})")
        if self.namespaces:
            parts.append(f"c.session_id IN ({','.join('?' * len(self.namespaces))})")
            params += list(self.namespaces)
        if self.include_files:
            parts.append("c.file_id IS NOT NULL")
        alive = "(c.expires_at IS NULL OR c.expires_at > ? OR c.pinned = 1)"
        sql = f"{alive} AND ({' OR '.join(parts)})"
        return sql, params

    def _other_sessions(self) -> tuple[str, list[Any]] | None:
        """SQL selecting the other conversation sessions in scope, or None."""
        if not self.cross_session:
            return None
        sql = "SELECT session_id FROM sessions WHERE session_id != ?"
        params: list[Any] = [self.session_id]
        if self.user_id is not None:
            sql += " AND user_id = ?"
            params.append(self.user_id)
        elif self.agent_identity is not None:
            sql += " AND user_id IS NULL"
        else:
            return None  # no user, no agent: nothing to cross into
        if self.agent_identity is not None:
            sql += " AND agent_identity = ?"
            params.append(self.agent_identity)
        return sql, params


@dataclass(frozen=True, slots=True)
class CandidateRow:
    """A chunk a memory leg found, with what ranking it needs."""

    rowid: int
    chunk_id: str
    session_id: str
    text: str
    sequence_end: int
    metadata_json: str
    created_at: str
    content_hash: str
    importance: float
    pinned: bool
    vector: bytes | None
    last_used: str
    #: When it happened (``coalesce(occurred_at, created_at)``).
    occurred_at: str | None = None


class RecallStore(Protocol):
    """Reads of the context builder's memory legs (backend-neutral)."""

    def session_owner(self, session_id: str) -> tuple[str | None, str | None] | None:
        """``(agent_identity, user_id)`` of a stored session, or None."""
        ...

    def salient(self, scope: Scope, threshold: float, limit: int) -> list[int]:
        """Rowids of chunks in scope (no lookback) that are pinned or whose stored
        importance is at least ``threshold``: pinned first, then by importance, newest."""
        ...

    def candidates(self, rowids: Sequence[int]) -> list[CandidateRow]:
        """The chunks with these rowids (and their vectors, when they have one)."""
        ...

    def scope_condition(self, scope: Scope, *, lookback: bool = True) -> tuple[str, list[Any]]:
        """What ``scope`` may recall as a condition on ``chunks AS c`` in this backend's
        SQL, and its parameters (a read filter's ``condition``, which this backend's
        search and full-text stores take)."""
        ...


SESSION_OF = "SELECT agent_identity, user_id FROM sessions WHERE session_id = ?"

SALIENT = """
SELECT c.id FROM chunks AS c WHERE {where} AND (c.pinned = 1 OR c.importance >= ?)
ORDER BY c.pinned DESC, c.importance DESC, c.created_at DESC, c.id DESC LIMIT ?
"""

CHUNKS = """
SELECT c.id, c.chunk_id, c.session_id, c.chunk_text, c.sequence_end, c.metadata_json,
       c.created_at, c.content_hash, c.importance, c.pinned, v.embedding_blob,
       coalesce(c.last_accessed_at, c.created_at), coalesce(c.occurred_at, c.created_at)
FROM chunks AS c LEFT JOIN chunks_vec AS v ON v.chunk_rowid = c.id
WHERE c.id IN (SELECT value FROM json_each(?))
"""


class SqliteRecallStore:
    """:class:`RecallStore` on ``sessions``, ``chunks`` and ``chunks_vec``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def session_owner(self, session_id: str) -> tuple[str | None, str | None] | None:
        row = self.db.query_one(SESSION_OF, (session_id,))
        if row is None:
            return None
        agent, user = row
        return (None if agent is None else str(agent)), (None if user is None else str(user))

    def scope_condition(self, scope: Scope, *, lookback: bool = True) -> tuple[str, list[Any]]:
        return scope.where(lookback=lookback)

    def salient(self, scope: Scope, threshold: float, limit: int) -> list[int]:
        where, params = scope.where(lookback=False)
        rows = self.db.query(SALIENT.format(where=where), [*params, threshold, limit])
        return [int(r[0]) for r in rows]

    def candidates(self, rowids: Sequence[int]) -> list[CandidateRow]:
        out = []
        for row in self.db.query(CHUNKS, (json.dumps(sorted(rowids)),)):
            rowid, chunk_id, session_id, text, seq_end, meta, created = row[:7]
            chash, importance, pinned, blob, last_used, occurred = row[7:]
            out.append(
                CandidateRow(
                    rowid=int(rowid),
                    chunk_id=str(chunk_id),
                    session_id=str(session_id),
                    text=str(text),
                    sequence_end=int(seq_end),
                    metadata_json=str(meta),
                    created_at=str(created),
                    content_hash=str(chash),
                    importance=float(importance),
                    pinned=bool(pinned),
                    vector=None if blob is None else bytes(blob),
                    last_used=str(last_used),
                    occurred_at=str(occurred),
                )
            )
        return out
