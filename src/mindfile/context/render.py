"""How stored things become chat messages (OpenAI chat format).

- A stored turn becomes a message: a string is a ``user`` message; a dict with a
  string ``role`` and a ``content`` (string or list of parts) or ``tool_calls`` is
  passed through as is (a shallow copy); anything else (a record without a role, a
  number, a list) becomes a ``user`` message holding its indexed text (or its JSON when
  it has none).
- The rolling summary is a ``system`` message ``Rolling session summary: ...`` (the
  summarizer's own wording).
- Memories are one ``system`` message: ``Relevant memories:`` then one line per memory,
  ``- (2026-03-02, session chat-1, user) text``; provenance is the chunk's date, its
  session (or ``note`` / ``fact`` for a user's notes and facts) and the speaker's role
  when known. Whitespace in the text is collapsed so every memory is one line.
"""

from __future__ import annotations

import json
from typing import Any

from mindfile.index.extract import extract_text
from mindfile.memory.summarizer import SUMMARY_PREFIX

__all__ = [
    "MEMORY_HEADER",
    "memory_line",
    "memory_message",
    "summary_message",
    "to_chat_message",
]

MEMORY_HEADER = "Relevant memories:"

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
    text: str, *, date: str, session_id: str, kind: str | None, role: str | None
) -> str:
    """One memory bullet with its provenance."""
    where = {"note": "note", "fact": "fact"}.get(kind or "", f"session {session_id}")
    parts = [p for p in (date, where, role) if p]
    return f"- ({', '.join(parts)}) {' '.join(text.split())}"


def memory_message(lines: list[str]) -> dict[str, Any]:
    """The memories as one system message."""
    return {"role": "system", "content": "\n".join([MEMORY_HEADER, *lines])}
