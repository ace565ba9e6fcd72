"""Rolling summarization: keep a session's prompt inside a token budget.

The seed's algorithm, run by :func:`summarize` each time a prompt is built:

1. Read the summary state; the *unsummarized* history is every event above its
   ``upper_sequence``. Utilization = tokens(summary message + unsummarized) / budget.
2. Trigger only when the unsummarized history has at least ``min_turns`` messages and
   utilization is above ``trigger_ratio``.
3. Fold the oldest unsummarized messages into the summary until utilization (the
   grown summary + what is left) is at most ``target_ratio``, always keeping the newest
   ``keep_recent`` messages verbatim. The condenser turns them into bullet lines, which
   are appended to the summary under a ``Recent condensed turns:`` heading. The summary
   itself is never re-condensed: if it alone outgrows the budget, everything but the
   newest messages is folded and the context stays over budget (rewrite the summary,
   e.g. with an LLM, and store it with :func:`write_summary_state` to shrink it).
4. A summary never makes the context bigger: if the grown summary costs at least as
   many tokens as the old summary plus the folded messages, nothing is written and the
   result's ``outcome`` is ``"not_smaller"`` (short one-sentence messages condense to
   themselves plus framing). Otherwise
   store the new summary with the last folded sequence as ``upper_sequence`` through the
   epoch compare-and-swap; if another writer got there first, start again from its
   state (at most three times).
5. Return the context: ``Rolling session summary: ...`` as a system message, then the
   messages the summary does not cover, with an ``outcome`` saying what was done.

The default condenser is extractive (no LLM): one ``- role: first sentence`` line per
message, clipped to 160 characters (tool results to 80). Any
``Callable[[Sequence[MemoryRecord]], str]`` can replace it (an LLM-backed one, say); its
exceptions propagate and nothing is written. Token counting defaults to
:func:`mindfile.tokens.estimate_tokens` (``ceil(chars / 4)`` plus 4 per message); pass
``token_counter=`` for a real tokenizer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mindfile.errors import ConfigError, InvalidInputError
from mindfile.index.chunking import normalize_text
from mindfile.index.extract import extract_role, extract_text
from mindfile.index.pipeline import check_id
from mindfile.memory.summary import read_summary_state, write_summary_state
from mindfile.memory.types import SummaryContext, SummaryOutcome, SummaryState
from mindfile.tokens import TokenCounter, estimate_tokens, message_tokens
from mindfile.types import MemoryRecord

if TYPE_CHECKING:
    from mindfile._deps import StoreDeps

__all__ = [
    "SECTION_HEADING",
    "SUMMARY_PREFIX",
    "Condenser",
    "SummaryConfig",
    "extractive_condenser",
    "summarize",
]

#: Turns the oldest messages into the text of one summary section.
Condenser = Callable[[Sequence[MemoryRecord]], str]

SUMMARY_PREFIX = "Rolling session summary: "
SECTION_HEADING = "Recent condensed turns:"
MAX_ATTEMPTS = 3
LINE_CHARS = 160
TOOL_LINE_CHARS = 80

_SENTENCE = re.compile(r"(?<=[.!?])\s")


@dataclass(frozen=True, slots=True)
class SummaryConfig:
    """When to summarize and how far (the seed's defaults)."""

    min_turns: int = 4
    trigger_ratio: float = 0.80
    target_ratio: float = 0.50
    keep_recent: int = 1

    def __post_init__(self) -> None:
        if self.min_turns < 1 or self.keep_recent < 0:
            raise ConfigError("min_turns must be >= 1 and keep_recent >= 0")
        if not 0 < self.target_ratio < self.trigger_ratio:
            raise ConfigError("need 0 < target_ratio < trigger_ratio")


def extractive_condenser(records: Sequence[MemoryRecord]) -> str:
    """``- role: first sentence`` per message, no LLM.

    Lines are clipped to 160 characters (80 for ``tool`` results); messages without
    text are skipped; payloads without a role are labelled ``event``.
    """
    lines = []
    for record in records:
        text = normalize_text(extract_text(record.payload))
        if not text:
            continue
        role = extract_role(record.payload) or "event"
        # Tool output is bulky and the assistant's next turn says what mattered in it.
        limit = TOOL_LINE_CHARS if role == "tool" else LINE_CHARS
        lines.append(f"- {role}: {_clip(_SENTENCE.split(text, maxsplit=1)[0], limit)}")
    return "\n".join(lines)


def summarize(
    engine: StoreDeps,
    session_id: str,
    token_budget: int,
    *,
    config: SummaryConfig | None = None,
    condenser: Condenser | None = None,
    token_counter: TokenCounter = estimate_tokens,
) -> SummaryContext:
    """Condense the session if it is over budget, and return the prompt context."""
    check_id(session_id, "session_id")
    if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
        raise InvalidInputError("token_budget must be a positive integer")
    if config is not None and not isinstance(config, SummaryConfig):
        raise InvalidInputError("config must be a SummaryConfig or None")
    cfg = config or SummaryConfig()
    condense = condenser or extractive_condenser
    for _ in range(MAX_ATTEMPTS):
        state = read_summary_state(engine, session_id) or SummaryState("", -1)
        pending = _events_after(engine, session_id, state.upper_sequence)
        costs = [message_tokens(r.payload, token_counter) for r in pending]
        base = _summary_tokens(state.summary, token_counter)
        used = base + sum(costs)
        if len(pending) < cfg.min_turns or used <= cfg.trigger_ratio * token_budget:
            return _context(session_id, state, pending, 0, used, token_budget, "within_budget")
        target = cfg.target_ratio * token_budget
        fold, text = _fold(
            state.summary, pending, costs, target, cfg.keep_recent, condense, counter=token_counter
        )
        if fold == 0:
            return _context(session_id, state, pending, 0, used, token_budget, "nothing_to_fold")
        # A summary never makes the context bigger: it must cost fewer tokens than the
        # summary and messages it replaces, else nothing is written.
        grown = _summary_tokens(text, token_counter)
        if grown >= base + sum(costs[:fold]):
            return _context(session_id, state, pending, 0, used, token_budget, "not_smaller")
        new = SummaryState(text, pending[fold - 1].sequence)
        outcome = write_summary_state(engine, session_id, new, state.epoch)
        if outcome.applied:
            new = SummaryState(text, new.upper_sequence, outcome.epoch)
            tokens = grown + sum(costs[fold:])
            return _context(
                session_id, new, pending[fold:], fold, tokens, token_budget, "condensed"
            )
    # Other writers kept winning: serve their latest state without condensing again.
    state = read_summary_state(engine, session_id) or SummaryState("", -1)
    pending = _events_after(engine, session_id, state.upper_sequence)
    used = _summary_tokens(state.summary, token_counter) + sum(
        message_tokens(r.payload, token_counter) for r in pending
    )
    return _context(session_id, state, pending, 0, used, token_budget, "contended")


def _fold(
    summary: str,
    pending: Sequence[MemoryRecord],
    costs: Sequence[int],
    target: float,
    keep_recent: int,
    condense: Condenser,
    *,
    counter: TokenCounter,
) -> tuple[int, str]:
    """Fold the oldest messages until summary + the rest fit in ``target`` tokens.

    The summary grows as messages are folded into it, so: fold as many as the current
    summary size says, measure the grown summary, and fold more while still over. Each
    message is condensed exactly once; all batches form one new section.
    """
    limit = len(pending) - keep_recent
    fold = 0
    parts: list[str] = []
    while fold < limit:
        base = _summary_tokens(_append(summary, parts), counter)
        left = sum(costs[fold:])
        if base + left <= target:
            break
        end = fold
        while end < limit and base + left > target:
            left -= costs[end]
            end += 1
        parts.append(condense(pending[fold:end]).strip())
        fold = end
    return fold, _append(summary, parts)


def _append(summary: str, parts: Sequence[str]) -> str:
    section = "\n".join(p for p in parts if p)
    return f"{summary}\n\n{SECTION_HEADING}\n{section}".strip() if section else summary


def _events_after(engine: StoreDeps, session_id: str, upper: int) -> list[MemoryRecord]:
    return engine.stores.events.after(session_id, upper)


def _summary_message(summary: str) -> dict[str, Any]:
    return {"role": "system", "content": SUMMARY_PREFIX + summary}


def _summary_tokens(summary: str, counter: TokenCounter) -> int:
    return message_tokens(_summary_message(summary), counter) if summary else 0


def _context(
    session_id: str,
    state: SummaryState,
    pending: Sequence[MemoryRecord],
    condensed: int,
    tokens: int,
    budget: int,
    outcome: SummaryOutcome,
) -> SummaryContext:
    messages: list[Any] = [_summary_message(state.summary)] if state.summary else []
    messages.extend(r.payload for r in pending)
    return SummaryContext(
        session_id=session_id,
        messages=tuple(messages),
        summary=state.summary or None,
        epoch=state.epoch,
        upper_sequence=state.upper_sequence,
        condensed=condensed,
        tokens=tokens,
        token_budget=budget,
        outcome=outcome,
    )


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"
