"""The ``llm_failures`` log: every failed model call of an LLM task, kept in the store.

The tasks in :mod:`mindfile.llm.tasks` write a row here before raising, so a model that
times out or answers malformed JSON leaves a durable trace (what failed, why, and the
start of the raw answer) instead of silently dropping what it was asked to extract.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mindfile.errors import InvalidInputError, MindfileError
from mindfile.index.pipeline import check_id
from mindfile.storage.db import utcnow

if TYPE_CHECKING:
    from mindfile.engine import Mindfile

__all__ = ["LLMFailure", "delete_llm_failures", "list_llm_failures", "record_llm_failure"]

MAX_LIST_LIMIT = 1000

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


def record_llm_failure(
    engine: Mindfile,
    error: MindfileError,
    *,
    task: str,
    scope: str | None = None,
    session_id: str | None = None,
) -> int:
    """Write ``error`` to the log in its own transaction; returns the row id."""
    check_id(task, "task")
    details = error.to_dict().get("details", {})
    raw = details.pop("raw", None)
    reason = str(details.pop("reason", error.code))
    model = details.pop("model", None)
    with engine.db.atomic():
        rowid = engine.db.scalar(
            INSERT_FAILURE,
            (
                task,
                reason,
                _clean(error.message),
                None if model is None else _clean(str(model)),
                None if scope is None else _clean(scope),
                None if session_id is None else _clean(session_id),
                None if raw is None else _clean(str(raw)),
                # ASCII escapes: a model's lone surrogate must not make the record fail.
                json.dumps(details, ensure_ascii=True, default=str),
                utcnow(),
            ),
        )
    return int(rowid)


def _clean(text: str) -> str:
    """``text`` storable as UTF-8 (a model can answer lone surrogates)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def list_llm_failures(
    engine: Mindfile, *, task: str | None = None, scope: str | None = None, limit: int = 50
) -> list[LLMFailure]:
    """Recorded failures, newest first, optionally only one task's or one scope's."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidInputError(f"limit must be an integer from 1 to {MAX_LIST_LIMIT}")
    rows = engine.db.query(LIST_FAILURES, (task, scope, limit))
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


def delete_llm_failures(
    engine: Mindfile,
    *,
    ids: Sequence[int] | None = None,
    scope: str | None = None,
    session_id: str | None = None,
    purge_all: bool = False,
) -> int:
    """Delete failures by id, scope and/or session (all filters must match); returns rows.

    With no filter nothing is deleted unless ``purge_all=True``: raw excerpts can hold
    personal data, so purge a user's rows (``scope=``) when that user's memory goes.
    """
    clauses: list[str] = []
    params: list[Any] = []
    if ids is not None:
        if isinstance(ids, str | bytes) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in ids
        ):
            raise InvalidInputError("ids must be a list of integers")
        clauses.append(f"id IN ({', '.join('?' for _ in ids) or 'NULL'})")
        params.extend(ids)
    for column, value in (("scope", scope), ("session_id", session_id)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(check_id(value, column))
    if not clauses and not purge_all:
        raise InvalidInputError("give ids, scope or session_id, or purge_all=True")
    where = " AND ".join(clauses) or "1"
    with engine.db.atomic():
        engine.db.execute(f"DELETE FROM llm_failures WHERE {where}", params)
        return engine.db.changes()
