"""The tool catalogue, provider-format schemas, and the never-raising dispatcher."""

from __future__ import annotations

import copy
import json
import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import jsonschema
from jsonschema.exceptions import best_match

from mindfile.errors import ConfigError, InvalidInputError, LimitExceededError, MindfileError
from mindfile.index.pipeline import check_id
from mindfile.tools._registry import ToolContext, ToolSpec

__all__ = [
    "MAX_ARGUMENT_CHARS",
    "ToolFormat",
    "UnknownToolError",
    "available_tools",
    "dispatch",
    "register_tools",
    "tool_schemas",
]

ToolFormat = Literal["openai", "anthropic"]

MAX_ARGUMENT_CHARS = 1_000_000
_MAX_MESSAGE_CHARS = 400
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what both providers accept

logger = logging.getLogger("mindfile.tools")

_registered: list[ToolSpec] = []
_validators: dict[str, tuple[ToolSpec, jsonschema.protocols.Validator]] = {}
_lock = threading.Lock()


class UnknownToolError(InvalidInputError):
    """The model called a tool that is not in the catalogue."""

    code = "unknown_tool"
    http_status = 404


def _builtin_tools() -> list[ToolSpec]:
    from mindfile.tools.memory_tools import MEMORY_TOOLS

    tools = list(MEMORY_TOOLS)
    try:  # the scheduler's tools, when that feature is installed
        from mindfile.scheduler.tools import SCHEDULE_TOOLS
    except ImportError:
        pass
    else:
        tools.extend(SCHEDULE_TOOLS)
    return tools


def available_tools() -> dict[str, ToolSpec]:
    """Every tool by name: memory tools, scheduler tools, then registered ones."""
    with _lock:
        extra = list(_registered)
    return {spec.name: spec for spec in [*_builtin_tools(), *extra]}


def register_tools(specs: Iterable[ToolSpec]) -> None:
    """Add tools to the catalogue (e.g. an application's own); names must be new.

    Each spec's schema is checked up front, so a broken tool fails at registration,
    not when a model first calls it. Registering the same spec again is a no-op.
    """
    new = list(specs)
    known = available_tools()
    for spec in new:
        if not isinstance(spec, ToolSpec):
            raise ConfigError("register_tools takes ToolSpec objects")
        if not _NAME.match(spec.name):
            raise ConfigError(f"tool name {spec.name!r} must match {_NAME.pattern}")
        if spec.parameters.get("type") != "object":
            raise ConfigError(f"tool {spec.name!r}: parameters must be an object schema")
        try:
            jsonschema.Draft202012Validator.check_schema(spec.parameters)
        except jsonschema.SchemaError as exc:
            raise ConfigError(f"tool {spec.name!r} has an invalid schema: {exc.message}") from exc
        if spec.name in known and known[spec.name] is not spec:
            raise ConfigError(f"a tool named {spec.name!r} is already registered")
    with _lock:
        for spec in new:
            if spec not in _registered and known.get(spec.name) is not spec:
                _registered.append(spec)


def tool_schemas(
    format: ToolFormat = "openai",
    *,
    include: Iterable[str] | None = None,
) -> list[dict[str, Any]]:
    """Tool definitions in a provider's format, for the ``tools=`` request parameter.

    ``"openai"``: ``{"type": "function", "function": {"name", "description",
    "parameters"}}``; ``"anthropic"``: ``{"name", "description", "input_schema"}``.
    ``include`` limits (and orders) the tools by name. The schemas are copies: editing
    them does not change what :func:`dispatch` validates against.
    """
    if format not in ("openai", "anthropic"):
        raise InvalidInputError(f"format must be 'openai' or 'anthropic', not {format!r}")
    tools = available_tools()
    if include is None:
        chosen = list(tools.values())
    else:
        names = [include] if isinstance(include, str) else list(include)
        missing = [n for n in names if n not in tools]
        if missing:
            raise InvalidInputError(f"unknown tools: {', '.join(map(str, missing))}")
        chosen = [tools[n] for n in names]
    if format == "openai":
        return [
            {
                "type": "function",
                "function": {
                    "name": s.name,
                    "description": s.description,
                    "parameters": copy.deepcopy(s.parameters),
                },
            }
            for s in chosen
        ]
    return [
        {"name": s.name, "description": s.description, "input_schema": copy.deepcopy(s.parameters)}
        for s in chosen
    ]


def dispatch(
    engine: Any,
    name: str,
    arguments: Mapping[str, Any] | str | None,
    *,
    user_id: str,
    session_id: str,
) -> dict[str, Any]:
    """Run one tool call and return ``{"ok": true, "result": ...}`` or an error.

    Errors are ``{"ok": false, "error": {"code", "message"}}`` with the stable codes of
    :mod:`mindfile.errors` plus ``unknown_tool`` and ``internal``. ``arguments`` may be a
    dict or the JSON text models emit. This function never raises (except for
    ``KeyboardInterrupt``/``SystemExit``): an unexpected failure is logged to the
    ``mindfile.tools`` logger and reported as ``internal`` without its details.
    """
    try:
        return {"ok": True, "result": _run(engine, name, arguments, user_id, session_id)}
    except MindfileError as exc:
        return _error(exc.code, exc.message)
    except Exception:
        logger.exception("tool %r failed", name)
        return _error("internal", f"the tool {name!r} failed unexpectedly; try again later")


def _run(engine: Any, name: Any, arguments: Any, user_id: Any, session_id: Any) -> Any:
    ctx = ToolContext(check_id(user_id, "user_id"), check_id(session_id, "session_id"))
    spec = available_tools().get(name) if isinstance(name, str) else None
    if spec is None:
        raise UnknownToolError(f"there is no tool named {str(name)[:64]!r}")
    args = _parse(arguments)
    error = best_match(_validator(spec).iter_errors(args))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        message = f"{error.message} (at {where})" if where else error.message
        raise InvalidInputError(f"invalid arguments for {name}: {_clip(message)}")
    result = _jsonable(spec.handler(engine, args, ctx))
    json.dumps(result, allow_nan=False)  # the contract: a model can always read it
    return result


def _parse(arguments: Any) -> dict[str, Any]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        if len(arguments) > MAX_ARGUMENT_CHARS:
            raise LimitExceededError(f"arguments are longer than {MAX_ARGUMENT_CHARS} chars")
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:
            raise InvalidInputError(f"arguments are not valid JSON: {exc}") from exc
    if not isinstance(arguments, Mapping):
        raise InvalidInputError("arguments must be a JSON object")
    return dict(arguments)


def _validator(spec: ToolSpec) -> jsonschema.protocols.Validator:
    cached = _validators.get(spec.name)
    if cached is not None and cached[0] is spec:
        return cached[1]
    validator = jsonschema.Draft202012Validator(spec.parameters)
    _validators[spec.name] = (spec, validator)
    return validator


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _error(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message}}


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE_CHARS else text[: _MAX_MESSAGE_CHARS - 1] + "…"
