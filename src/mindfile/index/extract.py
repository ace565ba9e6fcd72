"""Pull the indexable text out of a stored payload.

Understands plain strings, OpenAI-shaped chat messages (``content`` as a string or a
list of parts, ``tool_calls[].function.arguments`` as JSON text) and Anthropic-shaped
messages (``text``, ``tool_use.input`` and ``tool_result.content`` blocks). Anything else
contributes its string leaves, so no payload is ever unindexable by shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

__all__ = ["extract_author", "extract_role", "extract_text"]

_TEXT_KEYS = ("text", "content", "input", "arguments", "output", "result")


def extract_text(payload: Any) -> str:
    """The searchable text of ``payload``, parts joined by newlines."""
    return "\n".join(p for p in _parts(payload) if p.strip())


def extract_role(payload: Any) -> str | None:
    """The message role (``user``, ``assistant``, ``tool``, ``system``), if any."""
    if isinstance(payload, dict):
        role = payload.get("role")
        if isinstance(role, str):
            return role
    return None


def extract_author(payload: Any) -> str | None:
    """Who wrote the message: its ``name`` (the participant name of OpenAI-shaped chat
    messages), if a non-empty string, except on tool and function results (whose
    ``name`` is the tool's)."""
    if not isinstance(payload, dict) or payload.get("role") in ("tool", "function"):
        return None
    if payload.get("type") is not None:  # a typed content part (tool_use: the tool's name)
        return None
    name = payload.get("name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    return None


def _parts(payload: Any) -> Iterator[str]:
    if payload is None:
        return
    if isinstance(payload, str):
        yield payload
    elif isinstance(payload, bool | int | float):
        yield str(payload)
    elif isinstance(payload, list | tuple):
        for item in payload:
            yield from _parts(item)
    elif isinstance(payload, dict):
        yield from _message_parts(payload)


def _message_parts(msg: dict[str, Any]) -> Iterator[str]:
    kind = msg.get("type")
    if kind == "tool_use":  # Anthropic tool call
        yield from _named_call(msg.get("name"), msg.get("input"))
        return
    if kind == "image":
        return
    if "content" in msg or "text" in msg:
        yield from _parts(msg.get("text"))
        yield from _parts(msg.get("content"))
    for call in msg.get("tool_calls") or ():
        if isinstance(call, dict):
            fn = call["function"] if isinstance(call.get("function"), dict) else call
            yield from _named_call(fn.get("name"), fn.get("arguments"))
    if "function_call" in msg and isinstance(msg["function_call"], dict):
        fc = msg["function_call"]
        yield from _named_call(fc.get("name"), fc.get("arguments"))
    if not any(k in msg for k in ("content", "text", "tool_calls", "function_call")):
        keys = [k for k in _TEXT_KEYS if k in msg]
        if not keys and kind is None:  # an arbitrary record, not a typed content part
            keys = [k for k in msg if k != "role"]
        for key in keys:
            yield from _parts(msg[key])


def _named_call(name: Any, arguments: Any) -> Iterator[str]:
    if isinstance(name, str) and name:
        yield name
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            yield arguments
            return
    yield from _leaves(arguments)


def _leaves(value: Any) -> Iterator[str]:
    """String leaves of an arbitrary JSON value (tool-call arguments), in document order.

    Iterative: parsed tool arguments are model output and may nest ~1000 levels deep.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, bool | int | float):
            yield str(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
