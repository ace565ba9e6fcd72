"""Agent-memory value types: frozen, row-major dataclasses with ``to_dict()``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "Fact",
    "FactSource",
    "FactVersion",
    "MemoryHit",
    "Note",
    "ScratchpadState",
    "SummaryContext",
    "SummaryOutcome",
    "SummaryState",
    "SummaryWriteOutcome",
]

FactSource = Literal["agent", "user"]

#: What one :meth:`mindfile.Mindfile.summarize` call did (see :class:`SummaryContext`).
SummaryOutcome = Literal[
    "condensed", "within_budget", "nothing_to_fold", "not_smaller", "contended"
]


@dataclass(frozen=True, slots=True)
class Note:
    """One explicit long-term note.

    ``created_at`` is set once by Mindfile and survives updates; ``updated_at`` changes on
    every update. ``sequence`` is the note's event in its namespace session (an update
    gets a new one).
    """

    session_id: str
    note_id: str
    content: str
    source: str | None
    tags: tuple[str, ...]
    created_at: str
    updated_at: str
    sequence: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the fields."""
        return {
            "session_id": self.session_id,
            "note_id": self.note_id,
            "content": self.content,
            "source": self.source,
            "tags": list(self.tags),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "sequence": self.sequence,
        }


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """A compact search result over notes and facts, one per note or fact.

    ``kind`` is ``"note"`` (``note_id`` and ``tags`` set) or ``"fact"`` (``category``
    and ``key`` set). ``text`` is the best-matching chunk; ``score`` its fused score.
    """

    kind: Literal["note", "fact"]
    text: str
    score: float
    note_id: str | None = None
    tags: tuple[str, ...] = ()
    category: str | None = None
    key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The set fields only, so a model reads as little as possible."""
        out: dict[str, Any] = {"kind": self.kind}
        if self.kind == "note":
            out["note_id"] = self.note_id
            out["tags"] = list(self.tags)
        else:
            out["category"] = self.category
            out["key"] = self.key
        out["text"] = self.text
        out["score"] = round(self.score, 4)
        return out


@dataclass(frozen=True, slots=True)
class ScratchpadState:
    """A session's working-memory scratchpad."""

    session_id: str
    items: tuple[str, ...]
    updated_at: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the fields."""
        return {
            "session_id": self.session_id,
            "items": list(self.items),
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True, slots=True)
class SummaryState:
    """A session's rolling summary.

    ``upper_sequence`` is the highest event sequence the summary covers (-1: none).
    ``epoch`` counts applied writes; on write it is assigned by Mindfile (the expected
    epoch plus one), so the value passed in is ignored. ``updated_at`` is set by Mindfile.
    """

    summary: str
    upper_sequence: int
    epoch: int = 0
    updated_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the fields."""
        return {
            "summary": self.summary,
            "upper_sequence": self.upper_sequence,
            "epoch": self.epoch,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True, slots=True)
class SummaryWriteOutcome:
    """Result of a compare-and-swap summary write.

    ``applied`` is False when the stored epoch was not the expected one (a newer write
    won; this one was discarded). ``epoch`` is the stored epoch after the call.
    """

    applied: bool
    epoch: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the fields."""
        return {"applied": self.applied, "epoch": self.epoch}


@dataclass(frozen=True, slots=True)
class SummaryContext:
    """What :meth:`mindfile.Mindfile.summarize` produced for one prompt.

    ``messages`` is the context to send: a system message ``Rolling session summary:
    ...`` (when a summary exists) followed by the payloads the summary does not cover.
    ``condensed`` is how many messages this call folded into the summary (0 when it did
    not trigger); ``tokens`` is the context's size under the token counter used.

    ``outcome`` says what the call did:

    * ``"condensed"``: messages were folded and the new summary stored (``condensed > 0``);
    * ``"within_budget"``: it did not trigger (fewer than ``min_turns`` unsummarized
      messages, or utilization at or below ``trigger_ratio``);
    * ``"nothing_to_fold"``: over budget, but ``keep_recent`` keeps every message;
    * ``"not_smaller"``: the condensed summary would not have been smaller than the
      messages (and summary) it replaces, so nothing was written: a summary never makes
      the context bigger;
    * ``"contended"``: other writers' summaries kept winning the epoch race; their
      latest state is served as it is.
    """

    session_id: str
    messages: tuple[Any, ...]
    summary: str | None
    epoch: int
    upper_sequence: int
    condensed: int
    tokens: int
    token_budget: int
    outcome: SummaryOutcome = "within_budget"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the fields."""
        return {
            "session_id": self.session_id,
            "messages": list(self.messages),
            "summary": self.summary,
            "epoch": self.epoch,
            "upper_sequence": self.upper_sequence,
            "condensed": self.condensed,
            "tokens": self.tokens,
            "token_budget": self.token_budget,
            "outcome": self.outcome,
        }


@dataclass(frozen=True, slots=True)
class Fact:
    """One key/value fact in a scope (a user or agent id)."""

    scope: str
    category: str
    key: str
    value: str
    source: FactSource
    created_at: str
    updated_at: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the fields."""
        return {
            "scope": self.scope,
            "category": self.category,
            "key": self.key,
            "value": self.value,
            "source": self.source,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True, slots=True)
class FactVersion:
    """A value a fact used to have.

    ``updated_at`` is when that value was set, ``superseded_at`` when it stopped being
    current, and ``reason`` whether a newer value replaced it or the fact was deleted.
    """

    scope: str
    category: str
    key: str
    value: str
    source: str
    created_at: str
    updated_at: str
    superseded_at: str
    reason: Literal["updated", "deleted"]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the fields."""
        return {
            "scope": self.scope,
            "category": self.category,
            "key": self.key,
            "value": self.value,
            "source": self.source,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "superseded_at": self.superseded_at,
            "reason": self.reason,
        }
