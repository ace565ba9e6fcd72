"""The tool registry: each feature contributes :class:`ToolSpec` objects.

A tool is a name, a description, a JSON schema for its arguments and a handler
``handler(engine, args, ctx) -> JSON-serialisable``. :func:`mindfile.tools.dispatch`
validates arguments against the schema, runs the handler, and converts any
:class:`~mindfile.errors.MindfileError` into a structured error the model can read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolContext", "ToolSpec", "object_schema"]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Who is calling: the agent loop supplies these, never the model."""

    user_id: str
    session_id: str


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool an LLM can call."""

    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[[Any, dict[str, Any], ToolContext], Any] = field(repr=False)


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A JSON schema for a tool's arguments: these properties, no others."""
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
