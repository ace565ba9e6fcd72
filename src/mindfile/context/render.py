"""How stored things become chat messages (OpenAI chat format).

- A stored turn becomes a message: a string is a ``user`` message; a dict with a
  string ``role`` and a ``content`` (string or list of parts) or ``tool_calls`` is
  passed through as is (a shallow copy); anything else (a record without a role, a
  number, a list) becomes a ``user`` message holding its indexed text (or its JSON when
  it has none).
- The rolling summary is a ``system`` message ``Rolling session summary: ...`` (the
  summarizer's own wording).
- Memories are one ``system`` message: ``Relevant memories:`` then, grouped (the
  default, ``ContextConfig.group_by_session``), the user's notes and facts under
  ``Notes and facts:`` and each session's memories under ``Session chat-1 (2026-03-02
  to 2026-03-04):``, sessions oldest first, memories in their order in the session;
  each memory one line, ``- (2026-03-02, user) text``. Provenance is the date the memory
  happened (``occurred_at``, else when it was stored), ``note`` / ``fact`` for notes and
  facts, and the speaker's role when known. Ungrouped, the memories are listed in
  relevance order, each line naming its session: ``- (2026-03-02, session chat-1, user)
  text``. Whitespace in the text is collapsed so every memory is one line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mindfile.index.extract import extract_text
from mindfile.memory.summarizer import SUMMARY_PREFIX

__all__ = [
    "MEMORY_HEADER",
    "NOTES_HEADER",
    "MemoryLine",
    "grouped_lines",
    "memory_line",
    "memory_message",
    "session_header",
    "summary_message",
    "to_chat_message",
]

MEMORY_HEADER = "Relevant memories:"
#: The group of a user's notes and facts (durable knowledge, not from a session).
NOTES_HEADER = "Notes and facts:"

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def to_chat_message(payload: Any) -> dict[str, Any]:
    """A stored payload as a chat message (see the module docstring for the rules)."""
    if isinstance(payload, str):
        return {"role": "user", "content": payload}
    if isinstance(payload, dict):
        role = payload.get("role")
        if isinstance(role, str) and ("content" in payload or "tool_calls" in payload):
            return dict(payload)
        text = extract_text(payload) or json.dumps(payload, ensure_ascii=False)
        return {"role": role if role in _ROLES else "user", "content": text}
    text = extract_text(payload) or json.dumps(payload, ensure_ascii=False)
    return {"role": "user", "content": text}


def summary_message(summary: str) -> dict[str, Any]:
    """The rolling summary as a system message."""
    return {"role": "system", "content": SUMMARY_PREFIX + summary}


def memory_line(
    text: str,
    *,
    date: str,
    session_id: str,
    kind: str | None,
    role: str | None,
    with_session: bool = True,
) -> str:
    """One memory bullet with its provenance (``with_session=False``: without the
    session, which its group's header names)."""
    where = {"note": "note", "fact": "fact"}.get(kind or "")
    if where is None and with_session:
        where = f"session {session_id}"
    parts = [p for p in (date, where, role) if p]
    return f"- ({', '.join(parts)}) {' '.join(text.split())}"


def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key comparing the digit runs of ``text`` as numbers."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", text) if p)


def session_header(session_id: str, first: str, last: str) -> str:
    """A session group's header with the dates of its memories (ISO dates)."""
    dates = first if first == last else f"{first} to {last}"
    return f"Session {session_id} ({dates}):"


@dataclass(frozen=True, slots=True)
class MemoryLine:
    """A rendered memory and where it goes when memories are grouped.

    ``session_id`` None: a note or fact (their own group). ``when`` orders sessions and
    the memories of a group (ISO time); ``sequence`` orders a session's memories.
    """

    line: str
    session_id: str | None
    when: str
    sequence: int = 0

    @property
    def date(self) -> str:
        return self.when[:10]


def grouped_lines(memories: Sequence[MemoryLine]) -> list[str]:
    """The lines of the grouped memories message (after :data:`MEMORY_HEADER`).

    Notes and facts first (oldest first), then one group per session, sessions in the
    order of their earliest memory (equal times: by session id, numbers compared as
    numbers, so ``session_2`` comes before ``session_10``), each under
    :func:`session_header` with the dates of its memories, its memories in session
    order (sequence, then time).
    """
    notes = sorted((m for m in memories if m.session_id is None), key=lambda m: m.when)
    sessions: dict[str, list[MemoryLine]] = {}
    for m in memories:
        if m.session_id is not None:
            sessions.setdefault(m.session_id, []).append(m)
    out: list[str] = []
    if notes:
        out.append(NOTES_HEADER)
        out.extend(m.line for m in notes)
    groups = sorted(sessions.items(), key=lambda kv: (min(m.when for m in kv[1]), _natural(kv[0])))
    for session_id, group in groups:
        group.sort(key=lambda m: (m.sequence, m.when))
        dates = [m.date for m in group]
        out.append(session_header(session_id, min(dates), max(dates)))
        out.extend(m.line for m in group)
    return out


def memory_message(lines: list[str]) -> dict[str, Any]:
    """The memories as one system message."""
    return {"role": "system", "content": "\n".join([MEMORY_HEADER, *lines])}
