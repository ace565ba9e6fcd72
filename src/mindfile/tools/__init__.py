"""Agent memory as tools an LLM can call.

>>> import mindfile
>>> from mindfile.tools import dispatch, tool_schemas
>>> mem = mindfile.open(":memory:", embedder="hash")
>>> [t["function"]["name"] for t in tool_schemas("openai")][:2]
['memory_save', 'memory_search']
>>> out = dispatch(mem, "scratchpad_write", '{"items": ["find the bug"]}',
...                user_id="u1", session_id="s1")
>>> out["ok"], out["result"]["items"]
(True, ['find the bug'])
>>> dispatch(mem, "nope", {}, user_id="u1", session_id="s1")["error"]["code"]
'unknown_tool'

:func:`tool_schemas` gives the definitions in OpenAI or Anthropic format;
:func:`dispatch` validates a call's arguments against the tool's JSON schema, runs it
for the given user and session, and returns ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": {"code", "message"}}`` - it never raises into the agent loop.
The catalogue holds the memory tools (:mod:`mindfile.tools.memory_tools`), the scheduler's
tools when :mod:`mindfile.scheduler` is present, and anything added with
:func:`register_tools`.
"""

from mindfile.tools._dispatch import (
    MAX_ARGUMENT_CHARS,
    ToolFormat,
    UnknownToolError,
    available_tools,
    dispatch,
    register_tools,
    tool_schemas,
)
from mindfile.tools._registry import ToolContext, ToolSpec

__all__ = [
    "MAX_ARGUMENT_CHARS",
    "ToolContext",
    "ToolFormat",
    "ToolSpec",
    "UnknownToolError",
    "available_tools",
    "dispatch",
    "register_tools",
    "tool_schemas",
]
