"""The ``llm_failures`` log: every failed model call of an LLM task, kept in the store.

The tasks in :mod:`mindfile.llm.tasks` write a row here before raising, so a model that
times out or answers malformed JSON leaves a durable trace (what failed, why, and the
start of the raw answer) instead of silently dropping what it was asked to extract.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mindfile.errors import InvalidInputError, MindfileError
from mindfile.index.pipeline import check_id
from mindfile.storage.db import utcnow
from mindfile.storage.llm_failures import LLMFailure

if TYPE_CHECKING:
    from mindfile._deps import StoreDeps

__all__ = ["LLMFailure", "delete_llm_failures", "list_llm_failures", "record_llm_failure"]

MAX_LIST_LIMIT = 1000


def record_llm_failure(
    engine: StoreDeps,
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
        return engine.stores.llm_failures.record(
            task=task,
            reason=reason,
            message=_clean(error.message),
            model=None if model is None else _clean(str(model)),
            scope=None if scope is None else _clean(scope),
            session_id=None if session_id is None else _clean(session_id),
            raw_excerpt=None if raw is None else _clean(str(raw)),
            details=details,
            created_at=utcnow(),
        )


def _clean(text: str) -> str:
    """``text`` storable as UTF-8 (a model can answer lone surrogates)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def list_llm_failures(
    engine: StoreDeps, *, task: str | None = None, scope: str | None = None, limit: int = 50
) -> list[LLMFailure]:
    """Recorded failures, newest first, optionally only one task's or one scope's."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidInputError(f"limit must be an integer from 1 to {MAX_LIST_LIMIT}")
    return engine.stores.llm_failures.list_failures(task, scope, limit)


def delete_llm_failures(
    engine: StoreDeps,
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
    if ids is not None and (
        isinstance(ids, str | bytes)
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
    ):
        raise InvalidInputError("ids must be a list of integers")
    scope = None if scope is None else check_id(scope, "scope")
    session_id = None if session_id is None else check_id(session_id, "session_id")
    if ids is None and scope is None and session_id is None and not purge_all:
        raise InvalidInputError("give ids, scope or session_id, or purge_all=True")
    return engine.stores.llm_failures.delete(ids, scope, session_id)
