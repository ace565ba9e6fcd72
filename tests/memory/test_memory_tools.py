"""mindfile.tools: provider schemas, validation, dispatch results and structured errors."""

from __future__ import annotations

import importlib.util
import json
import re
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mindfile
from mindfile.errors import ConfigError, InvalidInputError
from mindfile.tools import ToolContext, ToolSpec, dispatch, register_tools, tool_schemas
from mindfile.tools import _dispatch as dispatch_module


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


MEMORY_TOOL_NAMES = [
    "memory_save",
    "memory_search",
    "memory_update",
    "memory_delete",
    "scratchpad_read",
    "scratchpad_write",
    "scratchpad_clear",
    "fact_set",
    "fact_get",
    "fact_list",
    "fact_delete",
]


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch_module, "_registered", [])


def call(
    mem: mindfile.Mindfile, name: str, args: Any = None, user: str = "alice"
) -> dict[str, Any]:
    out = dispatch(mem, name, args, user_id=user, session_id=f"chat-{user}")
    json.dumps(out)  # always JSON-serialisable
    return out


def ok(mem: mindfile.Mindfile, name: str, args: Any = None, user: str = "alice") -> Any:
    out = call(mem, name, args, user)
    assert out["ok"] is True, out
    return out["result"]


def err(mem: mindfile.Mindfile, name: str, args: Any = None, user: str = "alice") -> dict[str, str]:
    out = call(mem, name, args, user)
    assert out["ok"] is False, out
    assert set(out["error"]) == {"code", "message"}
    return dict(out["error"])


# -- schemas ------------------------------------------------------------------------------


def test_openai_format() -> None:
    tools = tool_schemas("openai")
    names = [t["function"]["name"] for t in tools]
    assert names[: len(MEMORY_TOOL_NAMES)] == MEMORY_TOOL_NAMES
    for tool in tools:
        assert set(tool) == {"type", "function"} and tool["type"] == "function"
        assert set(tool["function"]) == {"name", "description", "parameters"}
        params = tool["function"]["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        jsonschema.Draft202012Validator.check_schema(params)
        assert tool["function"]["description"]
    json.dumps(tools)


def test_anthropic_format() -> None:
    tools = tool_schemas("anthropic")
    assert [t["name"] for t in tools][: len(MEMORY_TOOL_NAMES)] == MEMORY_TOOL_NAMES
    for tool in tools:
        assert set(tool) == {"name", "description", "input_schema"}
        assert tool["input_schema"]["type"] == "object"
    openai = {t["function"]["name"]: t["function"]["parameters"] for t in tool_schemas()}
    assert openai == {t["name"]: t["input_schema"] for t in tools}


def test_include_filters_and_orders() -> None:
    tools = tool_schemas("anthropic", include=["fact_get", "memory_save"])
    assert [t["name"] for t in tools] == ["fact_get", "memory_save"]
    with pytest.raises(InvalidInputError, match="nope"):
        tool_schemas(include=["nope"])
    with pytest.raises(InvalidInputError):
        tool_schemas("gemini")  # type: ignore[arg-type]


@pytest.mark.skipif(
    importlib.util.find_spec("mindfile.scheduler.tools") is None, reason="no scheduler"
)
def test_scheduler_tools_are_included_when_present() -> None:
    names = {t["name"] for t in tool_schemas("anthropic")}
    assert {"schedule_create", "schedule_list"} <= names


# -- each tool ----------------------------------------------------------------------------


def test_memory_save_search_update_delete(mem: mindfile.Mindfile) -> None:
    saved = ok(mem, "memory_save", {"content": "Alice is allergic to peanuts.", "tags": ["Health"]})
    note_id = saved["note_id"]
    assert re.fullmatch(
        r"note-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", note_id
    )
    assert saved["tags"] == ["health"]
    note = mem.get_note("memory:alice", note_id)
    assert note is not None and note.source == "memory_save"

    results = ok(mem, "memory_search", {"query": "peanut allergy", "tags": ["health"]})["results"]
    assert results == [
        {
            "kind": "note",
            "note_id": note_id,
            "tags": ["health"],
            "text": "Alice is allergic to peanuts.",
            "score": results[0]["score"],
        }
    ]
    updated = ok(mem, "memory_update", {"note_id": note_id, "content": "Alice: no peanuts."})
    assert updated["note_id"] == note_id and updated["created_at"] == note.created_at
    assert updated["content"] == "Alice: no peanuts." and updated["tags"] == ["health"]
    assert ok(mem, "memory_delete", {"note_id": note_id}) == {"note_id": note_id, "deleted": True}
    assert ok(mem, "memory_delete", {"note_id": note_id})["deleted"] is False
    assert ok(mem, "memory_search", {"query": "peanuts"})["results"] == []


def test_memory_search_includes_facts_but_not_other_users(mem: mindfile.Mindfile) -> None:
    ok(mem, "memory_save", {"content": "Bob's bike is blue."}, user="bob")
    ok(mem, "fact_set", {"category": "pets", "key": "cat", "value": "Miso"})
    results = ok(mem, "memory_search", {"query": "cat Miso bike", "top_k": 10})["results"]
    assert [r["kind"] for r in results] == ["fact"]
    assert results[0]["category"] == "pets" and results[0]["key"] == "cat"


def test_scratchpad_tools(mem: mindfile.Mindfile) -> None:
    assert ok(mem, "scratchpad_read") == {"items": []}
    written = ok(mem, "scratchpad_write", {"items": ["goal: plan trip", "next: book hotel"]})
    assert written["items"] == ["goal: plan trip", "next: book hotel"]
    assert ok(mem, "scratchpad_read", "{}") == {"items": ["goal: plan trip", "next: book hotel"]}
    assert mem.read_scratchpad("chat-alice") is not None  # the loop's session, not the model's
    assert ok(mem, "scratchpad_read", user="bob") == {"items": []}
    too_many = err(mem, "scratchpad_write", {"items": ["x"] * 33})
    assert too_many["code"] == "limit_exceeded" and "32" in too_many["message"]
    too_long = err(mem, "scratchpad_write", {"items": ["y" * 241]})
    assert too_long["code"] == "limit_exceeded"
    assert ok(mem, "scratchpad_read")["items"] == ["goal: plan trip", "next: book hotel"]
    assert ok(mem, "scratchpad_clear") == {"cleared": True}
    assert ok(mem, "scratchpad_clear") == {"cleared": False}


def test_fact_tools(mem: mindfile.Mindfile) -> None:
    first = ok(mem, "fact_set", {"category": "home", "key": "city", "value": "Lisbon"})
    assert first["source"] == "agent"
    ok(mem, "fact_set", {"category": "home", "key": "city", "value": "Porto", "source": "user"})
    got = ok(mem, "fact_get", {"category": "home", "key": "city", "include_history": True})
    assert got["fact"]["value"] == "Porto" and got["fact"]["source"] == "user"
    assert [(h["value"], h["reason"]) for h in got["history"]] == [("Lisbon", "updated")]
    assert "history" not in ok(mem, "fact_get", {"category": "home", "key": "city"})
    assert ok(mem, "fact_get", {"category": "home", "key": "zip"}) == {"fact": None}
    ok(mem, "fact_set", {"category": "food", "key": "drink", "value": "tea"})
    listed = ok(mem, "fact_list")
    assert [(f["category"], f["key"]) for f in listed["facts"]] == [
        ("food", "drink"),
        ("home", "city"),
    ]
    assert listed["truncated"] is False
    assert [f["key"] for f in ok(mem, "fact_list", {"category": "home"})["facts"]] == ["city"]
    assert ok(mem, "fact_list", user="bob")["facts"] == []
    assert ok(mem, "fact_delete", {"category": "home", "key": "city"}) == {"deleted": True}
    # Deleted means gone: the value and its history (docs/privacy.md).
    assert mem.fact_history("alice", "home", "city") == []
    got = ok(mem, "fact_get", {"category": "home", "key": "city", "include_history": True})
    assert "Lisbon" not in json.dumps(got)


# -- errors -------------------------------------------------------------------------------


def test_arguments_may_be_json_text(mem: mindfile.Mindfile) -> None:
    saved = ok(mem, "memory_save", '{"content": "from a JSON string"}')
    assert saved["note_id"].startswith("note-")
    assert ok(mem, "scratchpad_read", "") == {"items": []}


@pytest.mark.parametrize(
    ("name", "args", "code", "fragment"),
    [
        ("memory_fly", {}, "unknown_tool", "memory_fly"),
        (None, {}, "unknown_tool", "None"),
        ("memory_save", "{not json", "invalid_input", "not valid JSON"),
        ("memory_save", "[1, 2]", "invalid_input", "JSON object"),
        ("memory_save", {}, "invalid_input", "'content' is a required property"),
        ("memory_save", {"content": 5}, "invalid_input", "content"),
        ("memory_save", {"content": "x", "extra": 1}, "invalid_input", "extra"),
        ("memory_save", {"content": "x", "tags": "solo"}, "invalid_input", "tags"),
        ("memory_save", {"content": "   "}, "invalid_input", "empty"),
        (
            "memory_save",
            {"content": "x", "tags": ["t"] * 0 + [f"t{i}" for i in range(17)]},
            "limit_exceeded",
            "16 tags",
        ),
        ("memory_save", {"content": "x", "tags": ["z" * 65]}, "limit_exceeded", "64"),
        ("memory_update", {"note_id": "note-nope", "content": "x"}, "not_found", "note-nope"),
        ("memory_update", {"note_id": "note-nope"}, "invalid_input", "content"),
        ("memory_search", {"query": "x", "top_k": 0}, "invalid_input", "top_k"),
        (
            "fact_set",
            {"category": "c", "key": "k", "value": "v", "source": "bot"},
            "invalid_input",
            "source",
        ),
        ("scratchpad_write", {"items": [1]}, "invalid_input", "items/0"),
    ],
)
def test_structured_errors(
    mem: mindfile.Mindfile, name: Any, args: Any, code: str, fragment: str
) -> None:
    error = err(mem, name, args)
    assert error["code"] == code
    assert fragment in error["message"]


def test_bad_context_is_an_error_not_an_exception(mem: mindfile.Mindfile) -> None:
    out = dispatch(mem, "scratchpad_read", {}, user_id="", session_id="s")
    assert out["ok"] is False and out["error"]["code"] == "invalid_input"
    out = dispatch(mem, "scratchpad_read", {}, user_id="u", session_id=None)  # type: ignore[arg-type]
    assert out["ok"] is False and out["error"]["code"] == "invalid_input"


def test_unexpected_failures_are_internal_errors_without_details(
    mem: mindfile.Mindfile, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(engine: Any, args: dict[str, Any], ctx: ToolContext) -> Any:
        raise RuntimeError("secret connection string postgres://u:pw@host")

    def unserialisable(engine: Any, args: dict[str, Any], ctx: ToolContext) -> Any:
        return {"when": object()}

    schema = {"type": "object", "properties": {}, "additionalProperties": False}
    register_tools([ToolSpec("boom", "fails", schema, boom)])
    register_tools([ToolSpec("odd", "bad result", schema, unserialisable)])
    for name in ("boom", "odd"):
        error = err(mem, name, {})
        assert error["code"] == "internal" and "secret" not in error["message"]
    assert "secret connection string" in caplog.text  # logged for the operator


def test_closed_engine_is_a_storage_error(db_path: Any) -> None:
    mem = mindfile.open(db_path, embedder="hash")
    mem.close()
    out = dispatch(mem, "scratchpad_read", {}, user_id="u", session_id="s")
    assert out["ok"] is False and out["error"]["code"] == "storage"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=10,
)


# One store for every example is fine: dispatch must cope with whatever came before.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=150)
@given(
    name=st.sampled_from([*MEMORY_TOOL_NAMES, "nope", ""]),
    args=st.one_of(
        st.dictionaries(
            st.sampled_from(
                ["content", "tags", "query", "note_id", "items", "category", "key", "value"]
            ),
            json_values,
            max_size=4,
        ),
        st.text(max_size=30),
        json_values,
    ),
)
def test_dispatch_never_raises(mem_memory: mindfile.Mindfile, name: str, args: Any) -> None:
    out = dispatch(mem_memory, name, args, user_id="fuzz", session_id="fuzz-session")
    json.dumps(out)
    assert isinstance(out["ok"], bool)
    if not out["ok"]:
        assert out["error"]["code"] != "internal", out


# -- registration -------------------------------------------------------------------------


def test_register_tools(mem: mindfile.Mindfile) -> None:
    def echo(engine: Any, args: dict[str, Any], ctx: ToolContext) -> Any:
        return {"said": args["text"], "user": ctx.user_id, "session": ctx.session_id}

    spec = ToolSpec(
        "echo",
        "Echo text back.",
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        echo,
    )
    register_tools([spec])
    register_tools([spec])  # idempotent
    assert tool_schemas("anthropic", include=["echo"])[0]["description"] == "Echo text back."
    assert ok(mem, "echo", {"text": "hi"}) == {
        "said": "hi",
        "user": "alice",
        "session": "chat-alice",
    }
    assert err(mem, "echo", {})["code"] == "invalid_input"
    clash = ToolSpec("echo", "other", {"type": "object"}, echo)
    bad = [
        clash,
        ToolSpec("memory_save", "shadow", {"type": "object"}, echo),
        ToolSpec("bad name!", "x", {"type": "object"}, echo),
        ToolSpec("arr", "x", {"type": "array"}, echo),
        ToolSpec("broken", "x", {"type": "object", "properties": {"a": {"type": 5}}}, echo),
    ]
    for tool in bad:
        with pytest.raises(ConfigError):
            register_tools([tool])
    with pytest.raises(ConfigError):
        register_tools(["not a spec"])  # type: ignore[list-item]
