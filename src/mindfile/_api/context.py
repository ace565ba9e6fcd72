"""Context building (docs/context.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any

from mindfile import context as _ctx
from mindfile._api._facet import Facet
from mindfile.tokens import TokenCounter, estimate_tokens

__all__ = ["ContextAPI"]


class ContextAPI(Facet):
    """Context building on :class:`mindfile.Mindfile`."""

    def build_context(
        self,
        session_id: str,
        query: str,
        *,
        token_budget: int,
        user_id: str | None = None,
        agent_identity: str | None = None,
        channel: str | None = None,
        system_prompt: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        reserve_system: int = 0,
        reserve_tools: int = 0,
        config: _ctx.ContextConfig | None = None,
        token_counter: TokenCounter = estimate_tokens,
        query_embedding: Sequence[float] | None = None,
        now: datetime | None = None,
        as_of: datetime | date | str | float | None = None,
    ) -> _ctx.Context:
        """The prompt context for the next turn: summary, memories, latest turns, in budget.

        Recency (the last turns), salience (importance >= 0.85 or pinned) and relevance
        (cosine >= 0.655) from the session, the agent's other sessions and ``user_id``'s
        notes and facts; memories reranked by ``0.70*similarity + 0.20*recency +
        0.10*importance``. ``tokens`` never exceeds ``token_budget``; every item says why
        it is there. Reads only. Time expressions in ``query`` ("last May", "latest")
        are resolved against ``as_of`` (default ``now``) and boost memories from that
        time, as in :meth:`search`.
        """
        self._mindfile.check_model()
        return _ctx.build_context(
            self._mindfile,
            session_id,
            query,
            token_budget=token_budget,
            user_id=user_id,
            agent_identity=agent_identity,
            channel=channel,
            system_prompt=system_prompt,
            tools=tools,
            reserve_system=reserve_system,
            reserve_tools=reserve_tools,
            config=config,
            token_counter=token_counter,
            query_embedding=query_embedding,
            now=now,
            as_of=as_of,
        )

    def cache_stats(self) -> _ctx.CacheStats:
        """Counters of the working-memory cache (hits, refreshes, loads...)."""
        return self._mindfile.working_memory.stats()
