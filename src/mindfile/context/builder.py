"""Build a prompt context for one turn: summary, memories and latest turns, in budget.

The budget policy (docs/context.md has the worked version):

1. ``reserved`` = the system-prompt reservation (the larger of ``reserve_system`` and
   the counted ``system_prompt`` message) + the tools reservation (the larger of
   ``reserve_tools`` and the counted JSON of ``tools``). More than the budget is a
   :class:`~mindfile.errors.LimitExceededError`. The rest is *available*.
2. The rolling summary, if there is one and it fits.
3. Memories, best first (salient ones before relevant ones), each added only if the
   memories message still fits in ``memory_share`` of what is left; one that does not
   fit is skipped and the next is tried.
4. The latest turns, newest first, while they fit in everything else; the first turn
   that does not fit ends them (the dialogue stays a contiguous tail). A ``tool``
   result whose assistant call was cut off is removed (chat APIs reject it).
5. What the turns left over goes to the memories skipped in step 3, in rank order.

Output order: system prompt, summary, memories, turns (oldest first). Nothing is ever
over budget: every step measures the messages it emits with the same counter.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from mindfile.context.render import (
    NOTES_HEADER,
    MemoryLine,
    grouped_lines,
    memory_line,
    memory_message,
    session_header,
    summary_message,
    to_chat_message,
)
from mindfile.context.rerank import Ranked, Reranked, rerank
from mindfile.context.retrieval import Scope, gather_candidates, resolve_scope
from mindfile.context.types import Context, ContextConfig, ContextItem
from mindfile.embed import fusion_calibration, fusion_weights
from mindfile.embed.base import Vector, check_query_vector, normalize
from mindfile.errors import InvalidInputError, LimitExceededError, MindfileError
from mindfile.index.chunking import normalize_text
from mindfile.index.pipeline import check_id, check_time
from mindfile.memory.summary import read_summary_state
from mindfile.retrieve.preferences import leg_query, recommendation_intent
from mindfile.retrieve.search import DEFAULT_CANDIDATES
from mindfile.retrieve.token_match import matcher_for
from mindfile.tokens import TokenCounter, estimate_tokens, message_tokens
from mindfile.types import MemoryRecord

if TYPE_CHECKING:
    from mindfile._deps import ContextDeps

__all__ = ["TOKENS_PER_MEMORY", "build_context"]

#: A typical memory line's cost, to size the hybrid leg from the budget.
TOKENS_PER_MEMORY = 25


def build_context(
    engine: ContextDeps,
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
    config: ContextConfig | None = None,
    token_counter: TokenCounter = estimate_tokens,
    query_embedding: Sequence[float] | None = None,
    now: datetime | None = None,
    as_of: Any = None,
) -> Context:
    """The context for the next model call in ``session_id`` about ``query``.

    Reads only (nothing is written). See the module docstring for the budget policy and
    docs/context.md for the retrieval rules. ``as_of``: the date the query's time
    expressions are resolved against (default ``now``; docs/retrieval.md).
    """
    _check_args(session_id, query, token_budget, user_id, agent_identity, channel)
    cfg = _config(config)
    if not callable(token_counter):
        raise InvalidInputError("token_counter must be a callable str -> int")
    clock = _now(now)
    query_date = clock if as_of is None else check_time(as_of, "as_of")
    reserved, head = _reserve(
        system_prompt, tools, reserve_system, reserve_tools, token_budget, token_counter
    )
    state = read_summary_state(engine, session_id)
    upper = state.upper_sequence if state is not None else -1
    tail = engine.working_memory.recent(engine.stores.events, session_id, cfg.recent_turns)
    recent = [r for r in tail if r.sequence > upper]
    # A recommendation question: the legs search its topic, as search does for one.
    intent = cfg.hybrid and cfg.preferences and recommendation_intent(query)
    query_vec, degraded = _query_vector(
        engine, leg_query(query, "vector") if intent else query, query_embedding
    )
    scope = resolve_scope(
        engine.db,
        session_id,
        user_id=user_id,
        agent_identity=agent_identity,
        channel=channel,
        cross_session=cfg.cross_session,
        include_files=cfg.include_files,
        cutoff=None if cfg.lookback_days is None else clock - timedelta(days=cfg.lookback_days),
        now=clock,
        recent_from=recent[0].sequence if recent else None,
    )
    available = token_budget - reserved
    notes = [degraded] if degraded else []
    ranked = _rank_memories(
        engine, scope, query, query_vec, cfg, clock, available, query_date, notes, intent
    )
    packer = _Packer(token_counter, available, grouped=cfg.group_by_session)
    for dup, _of, why in ranked.duplicates:
        packer.dropped.append(_memory_item(dup, "memory", why, 0))
    if state is not None and state.summary:
        packer.summary(session_id, state.summary, upper, state.epoch)
    chosen = _select(list(ranked.kept), cfg, packer)
    packer.memories(chosen, cfg)
    packer.turns(session_id, recent, cfg.recent_turns)
    packer.leftover_memories()
    return packer.context(session_id, query, head, reserved, token_budget, "; ".join(notes) or None)


# -- arguments ------------------------------------------------------------------------------


def _check_args(
    session_id: Any,
    query: Any,
    token_budget: Any,
    user_id: Any,
    agent_identity: Any,
    channel: Any,
) -> None:
    check_id(session_id, "session_id")
    if not isinstance(query, str):
        raise InvalidInputError(f"query must be a string, not {type(query).__name__}")
    if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
        raise InvalidInputError("token_budget must be a positive integer")
    for value, what in ((user_id, "user_id"), (agent_identity, "agent_identity")):
        if value is not None:
            check_id(value, what)
    if channel is not None:
        check_id(channel, "channel")


def _config(config: Any) -> ContextConfig:
    if config is None:
        return ContextConfig()
    if not isinstance(config, ContextConfig):
        raise InvalidInputError("config must be a ContextConfig")
    return config


def _now(now: Any) -> datetime:
    if now is None:
        return datetime.now(UTC)
    if not isinstance(now, datetime) or now.tzinfo is None:
        raise InvalidInputError("now must be a timezone-aware datetime")
    return now


def _reserve(
    system_prompt: Any,
    tools: Any,
    reserve_system: Any,
    reserve_tools: Any,
    budget: int,
    counter: TokenCounter,
) -> tuple[int, list[dict[str, Any]]]:
    """The reservation for system prompt and tools, and the system-prompt message."""
    for value, what in ((reserve_system, "reserve_system"), (reserve_tools, "reserve_tools")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"{what} must be a non-negative integer")
    head: list[dict[str, Any]] = []
    system_cost = 0
    if system_prompt is not None:
        if not isinstance(system_prompt, str):
            raise InvalidInputError("system_prompt must be a string or None")
        head.append({"role": "system", "content": system_prompt})
        system_cost = message_tokens(head[0], counter)
    tools_cost = 0
    if tools is not None:
        if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
            raise InvalidInputError("tools must be a list of tool schemas")
        try:
            tools_cost = counter(json.dumps(list(tools), ensure_ascii=False)) if tools else 0
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"tools are not JSON-serialisable: {exc}") from exc
    reserved = max(reserve_system, system_cost) + max(reserve_tools, tools_cost)
    if reserved > budget:
        raise LimitExceededError(
            f"the system prompt and tools need {reserved} tokens, more than the budget of {budget}",
            reserved=reserved,
            token_budget=budget,
        )
    return reserved, head


def _query_vector(
    engine: ContextDeps, query: str, given: Sequence[float] | None
) -> tuple[Vector | None, str | None]:
    dims = engine.embedder.dimensions
    if given is not None:
        try:
            arr = np.asarray(given, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError("query_embedding must be a sequence of numbers") from exc
        if arr.shape != (dims,) or not np.all(np.isfinite(arr)):
            raise InvalidInputError(f"query_embedding must be {dims} finite numbers")
        return normalize(arr), None
    text = normalize_text(query)
    if not text.strip():
        return None, None
    try:
        raw = engine.embedder.embed_query(text)
        return check_query_vector(raw, dims, engine.embedder.model_id), None
    except MindfileError as exc:
        return None, f"relevance leg unavailable: {exc.message}"
    except Exception as exc:  # a provider's own failure: degrade, as search does
        return None, f"relevance leg unavailable: query embedding failed: {exc}"


# -- selection ------------------------------------------------------------------------------


def _rank_memories(
    engine: ContextDeps,
    scope: Scope,
    query: str,
    query_vec: Vector | None,
    cfg: ContextConfig,
    clock: datetime,
    available: int,
    as_of: datetime | None = None,
    notes: list[str] | None = None,
    intent: bool = False,
) -> Reranked:
    """The salience, relevance, lexical and hybrid legs, reranked and de-duplicated
    (what degraded on the way appended to ``notes``; ``intent``: a recommendation
    question, ``query_vec`` then embeds its topic)."""
    candidates = gather_candidates(
        engine.db,
        engine.index,
        scope,
        query,
        query_vec,
        relevance_threshold=cfg.relevance_threshold,
        salience_threshold=cfg.salience_threshold,
        candidate_pool=cfg.candidate_pool,
        salient_pool=cfg.max_salient * 3,
        lexical_k=cfg.lexical_k,
        lexical=engine.lexical,
        hybrid_k=_hybrid_k(available, cfg) if cfg.hybrid else 0,
        fusion_weights=fusion_weights(engine.embedder),
        fusion_calibration=fusion_calibration(engine.embedder),
        hybrid_floor=cfg.hybrid_floor,
        as_of=as_of,
        token_matcher=matcher_for(engine.embedder) if cfg.token_match else None,
        feedback=cfg.feedback,
        authors=cfg.authors,
        preferences=intent,
        reranker=engine.reranker if cfg.rerank else None,
        notes=notes,
    )
    return rerank(
        candidates,
        now=clock,
        weights=cfg.weights,
        half_life=timedelta(days=cfg.half_life_days),
        near_duplicate=cfg.near_duplicate,
    )


def _hybrid_k(available: int, cfg: ContextConfig) -> int:
    """How many of the fused ranking to admit: what the whole budget could hold at
    ~:data:`TOKENS_PER_MEMORY` tokens a memory (at least 8; at most ``search``'s depth)."""
    if cfg.max_memories is not None:
        return cfg.max_memories
    return max(8, min(available // TOKENS_PER_MEMORY, DEFAULT_CANDIDATES))


def _select(kept: list[Ranked], cfg: ContextConfig, packer: _Packer) -> list[tuple[Ranked, str]]:
    """Salient first (at most ``max_salient``), then relevant, at most ``max_memories``
    (when set; else the budget decides)."""
    salient = [r for r in kept if "salience" in r.candidate.legs][: cfg.max_salient]
    picked = {id(r) for r in salient}
    ordered: list[tuple[Ranked, str]] = [(r, "salient") for r in salient]
    for r in kept:
        if id(r) in picked:
            continue
        if r.candidate.legs & {"relevance", "lexical", "hybrid"}:
            ordered.append((r, "memory"))
        else:
            why = f"salient, but over max_salient={cfg.max_salient}"
            packer.dropped.append(_memory_item(r, "salient", why, 0))
    if cfg.max_memories is None:
        return ordered
    for r, source in ordered[cfg.max_memories :]:
        why = f"ranked below max_memories={cfg.max_memories}"
        packer.dropped.append(_memory_item(r, source, why, 0))
    return ordered[: cfg.max_memories]


def _reason(r: Ranked, source: str, cfg: ContextConfig) -> str:
    c = r.candidate
    why = []
    if source == "salient":
        if c.pinned:
            why.append("pinned")
        else:
            why.append(f"importance {c.importance:.2f} ≥ {cfg.salience_threshold:g}")
    if "relevance" in c.legs:
        why.append(f"similarity {r.similarity:.2f} ≥ {cfg.relevance_threshold:g}")
    if "lexical" in c.legs:
        why.append(f"lexical match (BM25 top {cfg.lexical_k})")
    if "hybrid" in c.legs:
        why.append(f"among the best of search's ranking (relevance {c.relevance or 0.0:.2f})")
    return f"{' and '.join(why)}; {r.formula}"


def _memory_item(r: Ranked, source: str, reason: str, tokens: int) -> ContextItem:
    c = r.candidate
    return ContextItem(
        source="salient" if source == "salient" else "memory",
        reason=reason,
        tokens=tokens,
        session_id=c.session_id,
        text=c.text,
        sequence=c.sequence_end,
        chunk_id=c.chunk_id,
        created_at=c.created_at.isoformat(),
        score=r.score,
        explain=r.explain,
    )


def _line(r: Ranked, *, grouped: bool) -> MemoryLine:
    c = r.candidate
    role = c.metadata.get("role")
    kind = c.metadata.get("kind")
    when = (c.occurred_at or c.created_at).astimezone(UTC)
    text = memory_line(
        c.text,
        date=when.date().isoformat(),
        session_id=c.session_id,
        kind=kind if isinstance(kind, str) else None,
        role=role if isinstance(role, str) and kind not in ("note", "fact") else None,
        with_session=not grouped,
    )
    note = kind in ("note", "fact")
    return MemoryLine(text, None if note else c.session_id, when.isoformat(), c.sequence_end or 0)


# -- packing --------------------------------------------------------------------------------


@dataclass(slots=True)
class _Memory:
    ranked: Ranked
    source: str
    entry: MemoryLine
    reason: str
    accepted: bool = False

    @property
    def line(self) -> str:
        return self.entry.line


class _Headers:
    """The group headers of the accepted memories, to bound what one more costs."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.ranges: dict[str | None, tuple[str, str]] = {}

    def _cost(self, group: str | None, first: str, last: str) -> int:
        if group is None:
            return self.counter(NOTES_HEADER)
        return self.counter(session_header(group, first, last))

    def growth(self, entry: MemoryLine) -> int:
        """Tokens the headers grow by when ``entry`` joins (a new group: its header and
        a newline; else how much its date range widens)."""
        group, date = entry.session_id, entry.date
        if group not in self.ranges:
            return self._cost(group, date, date) + 1
        first, last = self.ranges[group]
        wider = self._cost(group, min(first, date), max(last, date))
        return max(0, wider - self._cost(group, first, last))

    def add(self, entry: MemoryLine) -> None:
        group, date = entry.session_id, entry.date
        first, last = self.ranges.get(group, (date, date))
        self.ranges[group] = (min(first, date), max(last, date))


@dataclass(slots=True)
class _Packer:
    """Fills the available tokens in the policy's order and remembers why."""

    counter: TokenCounter
    left: int
    items_head: list[ContextItem] = field(default_factory=list)
    messages_head: list[dict[str, Any]] = field(default_factory=list)
    pool: list[_Memory] = field(default_factory=list)
    turn_items: list[ContextItem] = field(default_factory=list)
    turn_messages: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[ContextItem] = field(default_factory=list)
    memory_cost: int = 0
    #: Memories grouped by session (``ContextConfig.group_by_session``).
    grouped: bool = True

    def summary(self, session_id: str, text: str, upper: int, epoch: int) -> None:
        msg = summary_message(text)
        cost = message_tokens(msg, self.counter)
        item = ContextItem(
            source="summary",
            reason=f"rolling summary of events up to sequence {upper} (epoch {epoch})",
            tokens=cost,
            session_id=session_id,
            text=text,
            sequence=upper,
        )
        if cost <= self.left:
            self.left -= cost
            self.items_head.append(item)
            self.messages_head.append(msg)
        else:
            reason = f"summary needs {cost} tokens, only {self.left} available"
            self.dropped.append(_replace_reason(item, reason))

    def _message(self, memories: Sequence[_Memory]) -> dict[str, Any]:
        if self.grouped:
            return memory_message(grouped_lines([m.entry for m in memories]))
        return memory_message([m.line for m in memories])

    def _block_cost(self, memories: Sequence[_Memory]) -> int:
        if not memories:
            return 0
        return message_tokens(self._message(memories), self.counter)

    def memories(self, chosen: Sequence[tuple[Ranked, str]], cfg: ContextConfig) -> None:
        """Step 3: accept memories in rank order while within ``memory_share``."""
        self.pool = [
            _Memory(r, s, _line(r, grouped=self.grouped), _reason(r, s, cfg)) for r, s in chosen
        ]
        cap = math.floor(self.left * cfg.memory_share)
        self._fill(cap)

    def _fill(self, cap: int) -> None:
        """Accept pool memories in rank order while the memories message fits ``cap``.

        Measuring the whole message for every candidate is quadratic (70 memories at a
        4,000-token budget: 2,500 counts of a growing message). A line usually adds at
        most its own tokens plus one for its newline, so that bound decides first and
        the exact count confirms once; a counter for which the bound does not hold
        falls back to measuring every step.
        """
        before = [m.accepted for m in self.pool]
        started = any(before)
        cost = self._block_cost(self._accepted())
        headers = self._headers(self._accepted())
        for mem in self.pool:
            if mem.accepted:
                continue
            grown = cost + self._line_bound(mem, headers) if started else self._block_cost([mem])
            if grown <= cap:
                mem.accepted = started = True
                cost = grown
                headers.add(mem.entry)
        used = self._block_cost(self._accepted())
        if used > cap:  # the bound did not hold for this counter
            for mem, was in zip(self.pool, before, strict=True):
                mem.accepted = was
            self._fill_exact(cap)
            return
        self._settle(used)

    def _fill_exact(self, cap: int) -> None:
        for mem in self.pool:
            if mem.accepted:
                continue
            mem.accepted = True
            if self._block_cost(self._accepted()) > cap:
                mem.accepted = False
        self._settle(self._block_cost(self._accepted()))

    def _accepted(self) -> list[_Memory]:
        return [m for m in self.pool if m.accepted]

    def _headers(self, accepted: Sequence[_Memory]) -> _Headers:
        headers = _Headers(self.counter)
        for mem in accepted:
            headers.add(mem.entry)
        return headers

    def _line_bound(self, mem: _Memory, headers: _Headers) -> int:
        """What adding ``mem`` usually costs at most: its line and one newline, and
        (grouped) what its group's header adds."""
        bound = self.counter(mem.line) + 1
        return bound + headers.growth(mem.entry) if self.grouped else bound

    def _settle(self, used: int) -> None:
        """The memories message now costs ``used``: charge the difference."""
        self.left -= used - self.memory_cost
        self.memory_cost = used

    def turns(self, session_id: str, recent: Sequence[MemoryRecord], window: int) -> None:
        """Step 4: the newest turns while they fit; a contiguous tail, oldest first."""
        taken: list[tuple[MemoryRecord, dict[str, Any], int]] = []
        stop: int | None = None
        for pos, record in enumerate(reversed(recent)):
            msg = to_chat_message(record.payload)
            cost = message_tokens(msg, self.counter)
            if cost > self.left:
                stop = pos
                reason = f"over budget: needs {cost} tokens, {self.left} left"
                self.dropped.append(_turn_item(session_id, record, msg, cost, reason))
                break
            self.left -= cost
            taken.append((record, msg, cost))
        if stop is not None:
            for record in list(reversed(recent))[stop + 1 :]:
                msg = to_chat_message(record.payload)
                reason = "older than a turn that did not fit (turns stay contiguous)"
                cost = message_tokens(msg, self.counter)
                self.dropped.append(_turn_item(session_id, record, msg, cost, reason))
        taken.reverse()
        while taken and taken[0][1].get("role") in ("tool", "function"):
            record, msg, cost = taken.pop(0)
            self.left += cost
            reason = "tool result whose assistant tool call is not in the context"
            self.dropped.append(_turn_item(session_id, record, msg, cost, reason))
        for n, (record, msg, cost) in enumerate(reversed(taken), start=1):
            reason = f"latest turn #{n} (newest first) of the last {window}"
            self.turn_items.append(_turn_item(session_id, record, msg, cost, reason))
        self.turn_items.reverse()
        self.turn_messages = [msg for _, msg, _ in taken]

    def leftover_memories(self) -> None:
        """Step 5: what the turns left over goes to the memories skipped in step 3."""
        self._fill(self.memory_cost + self.left)
        for mem in self.pool:
            if not mem.accepted:
                cost = self.counter(mem.line)
                why = f"over budget: about {cost} tokens, {self.left} left"
                self.dropped.append(_memory_item(mem.ranked, mem.source, why, cost))

    def context(
        self,
        session_id: str,
        query: str,
        head: list[dict[str, Any]],
        reserved: int,
        budget: int,
        degraded: str | None,
    ) -> Context:
        accepted = self._accepted()
        items = list(self.items_head)
        messages = [*head, *self.messages_head]
        # Item tokens: the growth of the message as each memory joins it, by a bound
        # (the line's tokens plus its newline) corrected on the last item so that the
        # items add up exactly to the message's cost.
        before = 0
        total = self._block_cost(accepted)
        headers = _Headers(self.counter)
        for i, mem in enumerate(accepted, start=1):
            if i == len(accepted):
                after = total
            elif i == 1:
                after = self._block_cost(accepted[:1])
            else:
                after = min(before + self._line_bound(mem, headers), total)
            headers.add(mem.entry)
            items.append(_memory_item(mem.ranked, mem.source, mem.reason, after - before))
            before = after
        if accepted:
            messages.append(self._message(accepted))
        items += self.turn_items
        messages += self.turn_messages
        used = reserved + sum(i.tokens for i in items)
        return Context(
            session_id=session_id,
            query=query,
            messages=tuple(messages),
            tokens=used,
            budget=budget,
            reserved=reserved,
            items=tuple(items),
            dropped=tuple(self.dropped),
            degraded=degraded,
        )


def _turn_item(
    session_id: str, record: MemoryRecord, msg: dict[str, Any], cost: int, reason: str
) -> ContextItem:
    content = msg.get("content")
    text = content if isinstance(content, str) else json.dumps(msg, ensure_ascii=False)
    return ContextItem(
        source="recent",
        reason=reason,
        tokens=cost,
        session_id=session_id,
        text=text,
        sequence=record.sequence,
        created_at=record.created_at,
    )


def _replace_reason(item: ContextItem, reason: str) -> ContextItem:
    return replace(item, reason=reason)
