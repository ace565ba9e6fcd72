"""The MCP server: Mindfile's memory tools for any MCP host (Claude, Cursor, VS Code, ...).

``mindfile mcp --db PATH [--user USER] [--session SESSION]`` serves over stdio (what
desktop hosts spawn) or ``--transport streamable-http`` on ``--host``/``--port``. Built
on the official ``mcp`` SDK's low-level server (extra ``mindfile[mcp]``), so the tools
are *the same definitions* as :func:`mindfile.tools.tool_schemas` — names, JSON
schemas, descriptions, error codes — not a second copy:

* every tool of :func:`mindfile.tools.available_tools` (``memory_save``,
  ``memory_search``, ``memory_update``, ``memory_delete``, scratchpad, facts,
  schedules...), run through :func:`mindfile.tools.dispatch`; a failure comes back as
  an MCP tool error whose text is ``{"code", "message"}`` with the stable code;
* ``memory_context``: :meth:`~mindfile.Mindfile.build_context` for a query and a token
  budget (the prompt-ready memory for the next turn);
* resources: ``mindfile://facts`` (the user's facts), ``mindfile://scratchpad`` and
  ``mindfile://summary`` (the session's).

One process serves one user (``--user``, default ``MINDFILE_USER`` or ``"default"``)
and one session (``--session``, default ``mcp:{user}``): every call is scoped to them
(docs/privacy.md). The store is opened once and kept warm; each call runs in a worker
thread. See docs/mcp.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any

from mindfile.engine import Mindfile
from mindfile.errors import BackendUnavailableError, InvalidInputError, MindfileError
from mindfile.index.pipeline import check_id
from mindfile.tools import available_tools, dispatch

__all__ = ["CONTEXT_TOOL", "build_server", "run_stdio", "streamable_http_app"]

logger = logging.getLogger("mindfile.mcp")

#: The MCP-only tool (build_context is not an LLM tool elsewhere: hosts call it to
#: prime a turn).
CONTEXT_TOOL: dict[str, Any] = {
    "name": "memory_context",
    "description": (
        "Prompt-ready memory for the next turn: the session's recent messages, its "
        "summary, and the memories most relevant to `query`, packed under "
        "`token_budget` tokens. Returns the messages and why each item is there."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": 8000,
                "description": "What the next turn is about (usually the user's message).",
            },
            "token_budget": {
                "type": "integer",
                "minimum": 50,
                "maximum": 200000,
                "default": 2000,
                "description": "Most tokens the returned context may use.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
}

RESOURCES = {
    "mindfile://facts": ("facts", "The user's facts (category, key, value)."),
    "mindfile://scratchpad": ("scratchpad", "The session's working-memory scratchpad."),
    "mindfile://summary": ("summary", "The session's rolling summary."),
}


def _sdk() -> tuple[Any, Any]:
    try:
        import mcp_types
        from mcp.server.lowlevel import Server
    except ImportError as exc:
        raise BackendUnavailableError(
            "the MCP server needs the MCP SDK: pip install 'mindfile[mcp]'", package="mcp"
        ) from exc
    return Server, mcp_types


def build_server(mem: Mindfile, *, user_id: str, session_id: str) -> Any:
    """A low-level MCP ``Server`` exposing ``mem`` to one user and session."""
    check_id(user_id, "user_id")
    check_id(session_id, "session_id")
    server_cls, types = _sdk()

    async def list_tools(ctx: Any, params: Any) -> Any:
        specs = [
            types.Tool(name=s.name, description=s.description, input_schema=s.parameters)
            for s in available_tools().values()
        ]
        specs.append(
            types.Tool(
                name=CONTEXT_TOOL["name"],
                description=CONTEXT_TOOL["description"],
                input_schema=CONTEXT_TOOL["parameters"],
            )
        )
        return types.ListToolsResult(tools=specs)

    async def call_tool(ctx: Any, params: Any) -> Any:
        name, args = params.name, dict(params.arguments or {})
        if name == CONTEXT_TOOL["name"]:
            answer = await asyncio.to_thread(_context, mem, args, user_id, session_id)
        else:
            answer = await asyncio.to_thread(
                dispatch, mem, name, args, user_id=user_id, session_id=session_id
            )
        if answer["ok"]:
            result = answer["result"]
            structured = result if isinstance(result, dict) else {"result": result}
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=_json(result))],
                structured_content=structured,
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=_json(answer["error"]))],
            is_error=True,
        )

    async def list_resources(ctx: Any, params: Any) -> Any:
        return types.ListResourcesResult(
            resources=[
                types.Resource(name=name, uri=uri, description=text, mime_type="application/json")
                for uri, (name, text) in RESOURCES.items()
            ]
        )

    async def read_resource(ctx: Any, params: Any) -> Any:
        uri = str(params.uri)
        if uri not in RESOURCES:
            raise ValueError(f"no such resource: {uri}")
        data = await asyncio.to_thread(_resource, mem, RESOURCES[uri][0], user_id, session_id)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=data)]
        )

    return server_cls(
        "mindfile",
        version=_version(),
        instructions=(
            "Long-term memory for this user. Search it (memory_search) before answering "
            "questions about the user or past conversations; save durable facts and "
            "preferences (memory_save, fact_set); call memory_context to prime a turn."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


def _context(
    mem: Mindfile, args: Mapping[str, Any], user_id: str, session_id: str
) -> dict[str, Any]:
    try:
        query = args.get("query")
        budget = args.get("token_budget", 2000)
        unknown = set(args) - {"query", "token_budget"}
        if unknown:
            raise InvalidInputError(f"unknown arguments: {sorted(unknown)}")
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("query must be a non-empty string")
        if isinstance(budget, bool) or not isinstance(budget, int) or not 50 <= budget <= 200000:
            raise InvalidInputError("token_budget must be an integer from 50 to 200000")
        context = mem.build_context(session_id, query, token_budget=budget, user_id=user_id)
        return {"ok": True, "result": context.to_dict()}
    except MindfileError as exc:
        return {"ok": False, "error": {"code": exc.code, "message": exc.message}}
    except Exception:
        logger.exception("memory_context failed")
        return {"ok": False, "error": {"code": "internal", "message": "memory_context failed"}}


def _resource(mem: Mindfile, kind: str, user_id: str, session_id: str) -> str:
    if kind == "facts":
        return _json([f.to_dict() for f in mem.list_facts(user_id)])
    if kind == "scratchpad":
        pad = mem.read_scratchpad(session_id)
        return _json(None if pad is None else pad.to_dict())
    state = mem.read_summary_state(session_id)
    return _json(None if state is None else state.to_dict())


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _version() -> str:
    from mindfile import __version__

    return __version__


async def run_stdio(mem: Mindfile, *, user_id: str, session_id: str) -> None:
    """Serve over this process's stdin/stdout until the host closes them."""
    server = build_server(mem, user_id=user_id, session_id=session_id)
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def streamable_http_app(mem: Mindfile, *, user_id: str, session_id: str, host: str) -> Any:
    """The Streamable HTTP transport as an ASGI app (served by uvicorn at ``/mcp``)."""
    server = build_server(mem, user_id=user_id, session_id=session_id)
    return server.streamable_http_app(host=host)
