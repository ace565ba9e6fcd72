"""Importance, expiry, quotas, consolidation (docs/memory-management.md)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from mindfile import memory as _mem
from mindfile._api._facet import Facet
from mindfile.manage import consolidate as _consolidate
from mindfile.manage import expiry as _expiry
from mindfile.manage import marks as _marks
from mindfile.manage import quota as _quota
from mindfile.manage import types as _mt
from mindfile.storage.db import utcnow

__all__ = ["ManageAPI"]


class ManageAPI(Facet):
    """Importance, expiry, quotas, consolidation on :class:`mindfile.Mindfile`."""

    def mark_important(self, session_id: str, sequence: int, importance: float = 0.9) -> int:
        """Set the importance of an event's chunks; returns how many chunks changed."""
        return _marks.set_event_chunks(self._mindfile, session_id, sequence, importance=importance)

    def pin(self, session_id: str, sequence: int) -> int:
        """Pin an event: never evicted or expired, importance 1.0 for salience."""
        return _marks.set_event_chunks(self._mindfile, session_id, sequence, pinned=True)

    def unpin(self, session_id: str, sequence: int) -> int:
        """Undo :meth:`pin` (the event's TTL and importance apply again)."""
        return _marks.set_event_chunks(self._mindfile, session_id, sequence, pinned=False)

    def mark_note_important(self, session_id: str, note_id: str, importance: float = 0.9) -> int:
        """:meth:`mark_important` for a note, by its id."""
        sequence = _marks.note_sequence(self._mindfile, session_id, note_id)
        return self._mindfile.mark_important(session_id, sequence, importance)

    def pin_note(self, session_id: str, note_id: str) -> int:
        """:meth:`pin` for a note, by its id (kept when the note is replaced)."""
        return self._mindfile.pin(
            session_id, _marks.note_sequence(self._mindfile, session_id, note_id)
        )

    def unpin_note(self, session_id: str, note_id: str) -> int:
        """:meth:`unpin` for a note, by its id."""
        return self._mindfile.unpin(
            session_id, _marks.note_sequence(self._mindfile, session_id, note_id)
        )

    def record_use(self, chunk_ids: Iterable[str]) -> int:
        """Boost chunks retrieved *and used* (search never writes); returns how many exist."""
        return _marks.record_use(self._mindfile, chunk_ids, utcnow())

    def set_decay_policy(
        self, *, half_life: float | timedelta | None, floor: float = 0.0
    ) -> _mt.DecayPolicy:
        """Importance halves every ``half_life`` unused; the sweep drops items below ``floor``."""
        return _expiry.set_decay_policy(self._mindfile, half_life, floor)

    def get_decay_policy(self) -> _mt.DecayPolicy:
        """The store's decay policy (no decay by default)."""
        return _expiry.get_decay_policy(self._mindfile)

    def sweep_expired(self, now: datetime | str | None = None) -> _mt.SweepResult:
        """Delete expired and decayed-below-floor chunks, and events left without any."""
        result = _expiry.sweep_expired(self._mindfile, now)
        return result

    def set_quota(
        self,
        scope: str,
        *,
        max_items: int | None = None,
        max_bytes: int | None = None,
        policy: _mt.QuotaPolicy = "evict",
    ) -> _mt.Quota:
        """Limit a scope (``agent:{id}``, ``user:{id}``, ``session:{id}``); see the docs."""
        return _quota.set_quota(
            self._mindfile, scope, max_items=max_items, max_bytes=max_bytes, policy=policy
        )

    def get_quota(self, scope: str) -> _mt.Quota | None:
        """A scope's quota, or None."""
        return _quota.get_quota(self._mindfile, scope)

    def list_quotas(self) -> list[_mt.Quota]:
        """Every quota, by scope."""
        return _quota.list_quotas(self._mindfile)

    def remove_quota(self, scope: str) -> bool:
        """Remove a scope's quota; True if it had one."""
        return _quota.remove_quota(self._mindfile, scope)

    def quota_usage(self, scope: str) -> _mt.QuotaUsage:
        """A scope's items and bytes as counted against its quota."""
        return _quota.quota_usage(self._mindfile, scope)

    def quota_scope(self, session_id: str) -> str:
        """The scope a session's items count against."""
        return _quota.session_scope(self._mindfile, session_id)

    def consolidate(
        self,
        *,
        session_id: str | None = None,
        scope: str | None = None,
        similarity: float | None = _consolidate.DEFAULT_SIMILARITY,
        older_than: float | timedelta | None = _consolidate.DEFAULT_OLDER_THAN,
        min_span: int = 2,
        max_span: int = 20,
        condenser: _mem.Condenser | None = None,
        drop_originals: bool = False,
        now: datetime | str | None = None,
    ) -> _mt.ConsolidationReport:
        """Merge near-duplicate chunks and condense old spans into summaries; idempotent."""
        return _consolidate.consolidate(
            self._mindfile,
            session_id=session_id,
            scope=scope,
            similarity=similarity,
            older_than=older_than,
            min_span=min_span,
            max_span=max_span,
            condenser=condenser,
            drop_originals=drop_originals,
            now=now,
        )

    def provenance(self, chunk_id: str) -> list[_mt.ConsolidationRecord]:
        """What consolidation folded into a chunk (merges, summaries), oldest first."""
        return _consolidate.provenance(self._mindfile, chunk_id)
