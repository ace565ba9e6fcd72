"""The LLM-failure store: the durable log of failed model calls (``llm_failures``).

:mod:`mindfile.llm.failures` validates and cleans what it records; this store writes,
lists and deletes rows. :class:`LLMFailure` is defined here (the feature re-exports it)
so storage never imports the feature package. Every method runs inside the caller's
transaction when one is open.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mindfile.storage.db import Database

__all__ = ["LLMFailure", "LLMFailureStore", "SqliteLLMFailureStore"]


@dataclass(frozen=True, slots=True)
class LLMFailure:
    """One recorded failure: the task, why it failed, and what the model said.

    ``reason`` is the :class:`~mindfile.errors.LLMError` reason (``malformed_json``,
    ``schema_invalid``, ``timeout``, ``http_status``...); ``raw_excerpt`` the start of
    the model's answer when there was one; ``details`` the rest of the error's details.
    """

    id: int
    task: str
    reason: str
    message: str
    model: str | None
    scope: str | None
    session_id: str | None
    raw_excerpt: str | None
    details: dict[str, Any]
    created_at: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the fields."""
        return {
            "id": self.id,
            "task": self.task,
            "reason": self.reason,
            "message": self.message,
            "model": self.model,
            "scope": self.scope,
            "session_id": self.session_id,
            "raw_excerpt": self.raw_excerpt,
            "details": dict(self.details),
            "created_at": self.created_at,
        }


class LLMFailureStore(Protocol):
    """What the LLM tasks need from storage (backend-neutral)."""

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
        """Add one failure; returns its id (ids grow)."""
        ...

    def list_failures(self, task: str | None, scope: str | None, limit: int) -> list[LLMFailure]:
        """Failures newest first; a ``None`` filter matches every row."""
        ...

    def delete(self, ids: Sequence[int] | None, scope: str | None, session_id: str | None) -> int:
        """Delete the failures matching every filter given (``None``: not filtered; no
        filter at all: every row); returns how many."""
        ...


INSERT_FAILURE = """
INSERT INTO llm_failures (task, reason, message, model, scope, session_id, raw_excerpt,
                          details_json, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING id
"""

LIST_FAILURES = """
SELECT id, task, reason, message, model, scope, session_id, raw_excerpt, details_json,
       created_at
FROM llm_failures
WHERE (?1 IS NULL OR task = ?1) AND (?2 IS NULL OR scope = ?2)
ORDER BY id DESC
LIMIT ?3
"""


class SqliteLLMFailureStore:
    """:class:`LLMFailureStore` on the ``llm_failures`` table."""

    def __init__(self, db: Database) -> None:
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
        rows = self.db.query(LIST_FAILURES, (task, scope, limit))
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
            clauses.append(f"id IN ({', '.join('?' for _ in ids) or 'NULL'})")
            params.extend(ids)
        for column, value in (("scope", scope), ("session_id", session_id)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = " AND ".join(clauses) or "1"
        with self.db.atomic():
            self.db.execute(f"DELETE FROM llm_failures WHERE {where}", params)
            return self.db.changes()
