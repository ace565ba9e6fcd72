"""Quotas per scope: max items and max bytes, enforced inside the write transaction.

**Scope of a session** (one per session): ``agent:{agent_identity}`` when the session
has an agent identity; else ``user:{u}`` for a notes namespace ``memory:{u}``; else
``session:{session_id}``.

**Items** are the chunks that belong to events (messages, notes, summaries): a short
message or note is one item, a long one several. Fact chunks are not counted.
**Bytes** are the UTF-8 bytes of those chunks' text plus the JSON payload bytes of the
scope's events. Expired-but-unswept items count until the sweep deletes them.

**On a write that ends over a limit**: policy ``fail`` raises
:class:`~mindfile.errors.LimitExceededError` and the transaction (the whole write) rolls
back; policy ``evict`` deletes items in this order until the scope fits — expired
first, then lowest effective (decayed) importance, then oldest (``created_at``, then
id) — never pinned items and never the items being written. An event whose last chunk
is evicted is deleted with it (its payload bytes are freed). If that cannot free
enough, the write fails as with ``fail``. Eviction happens in the same transaction as
the write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from typing import TYPE_CHECKING, Any, get_args

from mindfile.errors import InvalidInputError, LimitExceededError
from mindfile.index.pipeline import MAX_ID_CHARS, check_id
from mindfile.manage.expiry import get_decay_policy
from mindfile.manage.importance import iso, parse_time
from mindfile.manage.types import Quota, QuotaPolicy, QuotaUsage
from mindfile.storage.db import utcnow

if TYPE_CHECKING:
    from mindfile._deps import StoreDeps
    from mindfile.storage.quotas import QuotaRow, QuotaStore

__all__ = [
    "SCOPE_KINDS",
    "check_scope",
    "enforce_quotas",
    "get_quota",
    "list_quotas",
    "quota_usage",
    "remove_quota",
    "scope_for",
    "session_scope",
    "set_quota",
]

SCOPE_KINDS = ("agent", "user", "session")
NOTES_PREFIX = "memory:"


def scope_for(session_id: str, agent_identity: str | None) -> str:
    """The quota scope of a session (see the module docstring)."""
    if agent_identity is not None:
        return f"agent:{agent_identity}"
    if session_id.startswith(NOTES_PREFIX) and len(session_id) > len(NOTES_PREFIX):
        return f"user:{session_id[len(NOTES_PREFIX) :]}"
    return f"session:{session_id}"


def session_scope(engine: StoreDeps, session_id: str) -> str:
    """The scope a (possibly not yet stored) session's items count against."""
    check_id(session_id, "session_id")
    return scope_for(session_id, engine.stores.quotas.agent_of(session_id))


def check_scope(scope: Any) -> str:
    """``scope`` if it is ``agent:{id}``, ``user:{id}`` or ``session:{id}``."""
    if not isinstance(scope, str):
        raise InvalidInputError("scope must be a string like 'agent:{id}' or 'user:{id}'")
    kind, sep, rest = scope.partition(":")
    if not sep or kind not in SCOPE_KINDS or not rest:
        raise InvalidInputError(
            f"scope must be 'agent:{{id}}', 'user:{{id}}' or 'session:{{id}}', not {scope!r}"
        )
    check_id(rest, "scope id")
    if len(scope) > MAX_ID_CHARS + len("session:"):
        raise InvalidInputError("scope is too long")
    return scope


def _limit(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"{what} must be a non-negative integer or None")
    if value >= 2**63:
        raise InvalidInputError(f"{what} is too large")
    return value


def set_quota(
    engine: StoreDeps,
    scope: str,
    *,
    max_items: int | None = None,
    max_bytes: int | None = None,
    policy: QuotaPolicy = "evict",
) -> Quota:
    """Create or replace a scope's quota; enforced from the scope's next write on."""
    check_scope(scope)
    items, size = _limit(max_items, "max_items"), _limit(max_bytes, "max_bytes")
    if items is None and size is None:
        raise InvalidInputError("give max_items and/or max_bytes (remove_quota removes one)")
    if policy not in get_args(QuotaPolicy):
        raise InvalidInputError(f"policy must be 'evict' or 'fail', not {policy!r}")
    with engine.db.atomic():
        engine.stores.quotas.upsert(scope, items, size, policy, utcnow())
        quota = get_quota(engine, scope)
    assert quota is not None
    return quota


def get_quota(engine: StoreDeps, scope: str) -> Quota | None:
    """The scope's quota, or None."""
    row = engine.stores.quotas.get(check_scope(scope))
    return None if row is None else _quota(row)


def list_quotas(engine: StoreDeps) -> list[Quota]:
    """Every quota, by scope."""
    return [_quota(r) for r in engine.stores.quotas.list_quotas()]


def remove_quota(engine: StoreDeps, scope: str) -> bool:
    """Remove a scope's quota; True if it had one."""
    check_scope(scope)
    with engine.db.atomic():
        return engine.stores.quotas.remove(scope)


def quota_usage(
    engine: StoreDeps, scope: str, now: str | None = None, *, count_bytes: bool = True
) -> QuotaUsage:
    """The scope's items and bytes as counted against its quota.

    ``count_bytes=False`` skips reading the scope's text (``bytes`` is then 0).
    """
    check_scope(scope)
    usage = engine.stores.quotas.usage(scope, now or utcnow(), count_bytes=count_bytes)
    return QuotaUsage(
        scope, usage.items, usage.bytes, usage.expired_items, get_quota(engine, scope)
    )


def enforce_quotas(
    engine: StoreDeps,
    session_ids: Sequence[str],
    written: Sequence[tuple[str, int]],
    now: datetime | str | None = None,
) -> None:
    """Bring every quota'd scope touched by a write back within its limits.

    Run inside the write's transaction, after the write: ``written`` are the events it
    stored (never evicted). Raises :class:`LimitExceededError` (rolling the write back)
    for policy ``fail``, or when eviction cannot free enough.
    """
    quotas = engine.stores.quotas
    if not quotas.has_any():
        return  # the common case: no quotas, no cost
    moment = parse_time(now)
    stamp = iso(moment)
    for scope in quotas.scopes_with_quotas(session_ids):
        quota = get_quota(engine, scope)
        assert quota is not None
        usage = quota_usage(engine, scope, stamp, count_bytes=quota.max_bytes is not None)
        if _fits(quota, usage.items, usage.bytes):
            continue
        if quota.policy == "fail":
            raise _over(quota, usage, "")
        plan = _plan_eviction(engine, quota, usage, written, moment)
        if plan is None:
            raise _over(quota, usage, " and evicting every unpinned older item would not fit it")
        rowids, freed_bytes = plan
        engine.stores.lifecycle.delete_chunks(rowids)
        quotas.count_eviction(scope, len(rowids), freed_bytes)


#: The first page of eviction candidates; each further page is twice as large.
FIRST_PAGE = 64


def _plan_eviction(
    engine: StoreDeps,
    quota: Quota,
    usage: QuotaUsage,
    written: Sequence[tuple[str, int]],
    now: datetime,
) -> tuple[list[int], int] | None:
    """Rowids to evict (in order) and the bytes that frees, or None if it cannot fit.

    Candidates come from SQL in eviction order, a page at a time, so a write at
    capacity reads only the few rows it evicts (plus one sort of the scope in SQLite).
    """
    half_life = get_decay_policy(engine).half_life_seconds
    store: QuotaStore = engine.stores.quotas
    protected = store.protected(written)
    items, size = usage.items, usage.bytes
    remaining: dict[tuple[str, int], int] = {}  # an event's chunks not yet chosen
    chosen: list[int] = []
    freed = 0
    offset = 0
    page = max(FIRST_PAGE, items - (quota.max_items if quota.max_items is not None else items))
    while not _fits(quota, items, size):
        rows = store.candidates(
            quota.scope, protected, iso(now), half_life, limit=page, offset=offset
        )
        if not rows:
            return None
        offset, page = offset + len(rows), page * 2
        events: dict[int, list[tuple[tuple[str, int], int]]] = {}
        for linked in store.candidate_events([rowid for rowid, _ in rows]):
            key = (linked.session_id, linked.sequence)
            remaining.setdefault(key, linked.chunks)
            events.setdefault(linked.chunk_rowid, []).append((key, linked.payload_bytes))
        for rowid, text_bytes in rows:
            if _fits(quota, items, size):
                break
            chosen.append(rowid)
            gained = text_bytes
            for key, payload in events.get(rowid, []):
                remaining[key] -= 1
                if remaining[key] == 0:  # the event goes with its last chunk
                    gained += payload
            items, size, freed = items - 1, size - gained, freed + gained
    return chosen, freed


def _fits(quota: Quota, items: int, size: int) -> bool:
    return (quota.max_items is None or items <= quota.max_items) and (
        quota.max_bytes is None or size <= quota.max_bytes
    )


def _over(quota: Quota, usage: QuotaUsage, why: str) -> LimitExceededError:
    parts: list[str] = []
    details: dict[str, int] = {}
    if quota.max_items is not None:
        parts.append(f"{usage.items} items (max {quota.max_items})")
        details.update(items=usage.items, max_items=quota.max_items)
    if quota.max_bytes is not None:
        parts.append(f"{usage.bytes} bytes (max {quota.max_bytes})")
        details.update(bytes=usage.bytes, max_bytes=quota.max_bytes)
    hint = (
        f"; {usage.expired_items} of its items are expired (sweep_expired() frees them)"
        if usage.expired_items
        else ""
    )
    return LimitExceededError(
        f"quota for {quota.scope!r} exceeded (policy {quota.policy!r}): this write would "
        f"leave {' and '.join(parts)}{why}; nothing was written{hint}",
        scope=quota.scope,
        policy=quota.policy,
        **details,
    )


def _quota(row: QuotaRow) -> Quota:
    fields: dict[str, Any] = asdict(row)
    return Quota(**fields)
