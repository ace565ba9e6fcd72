"""Notes, scratchpad, rolling summaries and facts (docs/agent-memory.md)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from mindfile import memory as _mem
from mindfile._api._facet import Facet
from mindfile.tokens import TokenCounter, estimate_tokens

__all__ = ["AgentMemoryAPI"]


class AgentMemoryAPI(Facet):
    """Notes, scratchpad, rolling summaries and facts on :class:`mindfile.Mindfile`."""

    def store_note(
        self,
        session_id: str,
        note_id: str,
        content: str,
        *,
        source: str | None = None,
        tags: Sequence[str] | None = None,
        importance: float | None = None,
        ttl: float | timedelta | None = None,
    ) -> _mem.Note:
        """Store a note; an existing ``note_id`` is replaced atomically.

        ``session_id`` is the namespace, ``memory:{user_id}`` by convention (see
        :func:`mindfile.memory.notes_session`). Timestamps are set by Mindfile; a replaced
        note keeps its ``created_at``, pin, importance and expiry unless ``importance``
        or ``ttl`` are given (docs/memory-management.md).
        """
        return _mem.store_note(
            self._mindfile,
            session_id,
            note_id,
            content,
            source=source,
            tags=tags,
            importance=importance,
            ttl=ttl,
        )

    def update_note(
        self,
        session_id: str,
        note_id: str,
        *,
        content: str | None = None,
        source: str | None = None,
        tags: Sequence[str] | None = None,
    ) -> _mem.Note:
        """Change an existing note (``None`` keeps a field); :class:`NotFoundError` if absent."""
        return _mem.update_note(
            self._mindfile, session_id, note_id, content=content, source=source, tags=tags
        )

    def delete_note(self, session_id: str, note_id: str) -> bool:
        """Delete a note with all its chunks, vectors and FTS rows; True if it existed."""
        return _mem.delete_note(self._mindfile, session_id, note_id)

    def get_note(self, session_id: str, note_id: str) -> _mem.Note | None:
        """One note, or None."""
        return _mem.get_note(self._mindfile, session_id, note_id)

    def list_notes(
        self,
        session_id: str,
        *,
        tags: Sequence[str] | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[_mem.Note]:
        """Notes, most recently written first, optionally only those with all ``tags``."""
        return _mem.list_notes(self._mindfile, session_id, tags=tags, limit=limit, offset=offset)

    def search_notes(
        self,
        session_id: str,
        query: str,
        *,
        tags: Sequence[str] | None = None,
        top_k: int = 10,
        facts_scope: str | None = None,
    ) -> list[_mem.MemoryHit]:
        """Hybrid search over notes (and ``facts_scope``'s facts): one hit per item."""
        return _mem.search_notes(
            self._mindfile, session_id, query, tags=tags, top_k=top_k, facts_scope=facts_scope
        )

    def read_scratchpad(self, session_id: str) -> _mem.ScratchpadState | None:
        """The session's working-memory scratchpad, or None."""
        return _mem.read_scratchpad(self._mindfile, session_id)

    def write_scratchpad(self, session_id: str, items: Sequence[str]) -> _mem.ScratchpadState:
        """Replace the scratchpad (at most 32 items of at most 240 characters)."""
        return _mem.write_scratchpad(self._mindfile, session_id, items)

    def clear_scratchpad(self, session_id: str) -> bool:
        """Remove the scratchpad; True if there was one."""
        return _mem.clear_scratchpad(self._mindfile, session_id)

    def read_summary_state(self, session_id: str) -> _mem.SummaryState | None:
        """The session's rolling summary state, or None."""
        return _mem.read_summary_state(self._mindfile, session_id)

    def write_summary_state(
        self, session_id: str, state: _mem.SummaryState, expected_epoch: int
    ) -> _mem.SummaryWriteOutcome:
        """Compare-and-swap the summary state on its epoch (see :mod:`mindfile.memory.summary`)."""
        return _mem.write_summary_state(self._mindfile, session_id, state, expected_epoch)

    def summarize(
        self,
        session_id: str,
        token_budget: int,
        *,
        config: _mem.SummaryConfig | None = None,
        condenser: _mem.Condenser | None = None,
        token_counter: TokenCounter = estimate_tokens,
    ) -> _mem.SummaryContext:
        """Fold old messages into the rolling summary when over budget; return the context."""
        return _mem.summarize(
            self._mindfile,
            session_id,
            token_budget,
            config=config,
            condenser=condenser,
            token_counter=token_counter,
        )

    def set_fact(
        self,
        scope: str,
        category: str,
        key: str,
        value: str,
        *,
        source: _mem.FactSource = "agent",
    ) -> _mem.Fact:
        """Set a fact in ``scope`` (a user or agent id); the old value goes to history."""
        return _mem.set_fact(self._mindfile, scope, category, key, value, source=source)

    def get_fact(self, scope: str, category: str, key: str) -> _mem.Fact | None:
        """The current fact, or None."""
        return _mem.get_fact(self._mindfile, scope, category, key)

    def list_facts(self, scope: str, *, category: str | None = None) -> list[_mem.Fact]:
        """The scope's facts, by category then key."""
        return _mem.list_facts(self._mindfile, scope, category=category)

    def delete_fact(
        self, scope: str, category: str, key: str, *, keep_history: bool = False
    ) -> bool:
        """Delete a fact and its history (``keep_history=True`` retires it: the value
        moves to the history instead)."""
        return _mem.delete_fact(self._mindfile, scope, category, key, keep_history=keep_history)

    def fact_history(self, scope: str, category: str, key: str) -> list[_mem.FactVersion]:
        """Earlier values of a fact, most recently superseded first."""
        return _mem.fact_history(self._mindfile, scope, category, key)
