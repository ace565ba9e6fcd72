"""The MCP server, spawned as a real process and driven by the MCP SDK's client."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

import mindfile
from mindfile.mcp_server import CONTEXT_TOOL
from mindfile.tools import available_tools


def _store(location: Path | str) -> Path | str:
    """A store (a directory gets a file in it; a Postgres URL is used as it is)."""
    path = location / "m.db" if isinstance(location, Path) else location
    with mindfile.open(path) as mem:  # the bundled model: build_context needs meaning
        mem.store("bob-chat", 1, "Bob's bank pin is 4321 and he lives in Porto", user_id="bob")
        mem.store_note("memory:bob", "n1", "Bob lives in Porto")
        mem.store("alice-chat", 1, "Alice lives in Lisbon", user_id="alice")
    return path


def _run(path: Path | str, body: Callable[[ClientSession], Awaitable[None]], *args: str) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mindfile", "mcp", "--db", str(path), "--user", "alice", *args],
        env=dict(os.environ),  # the same mindfile (PYTHONPATH) as this process
    )

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await body(session)

    asyncio.run(asyncio.wait_for(main(), 60))


def _payload(result: Any) -> Any:
    return json.loads(result.content[0].text)


def test_the_tools_are_the_shared_definitions(tmp_path: Path) -> None:
    async def body(session: ClientSession) -> None:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        shared = available_tools()
        assert set(listed) == set(shared) | {"memory_context"}
        for name, spec in shared.items():
            assert listed[name].input_schema == spec.parameters
            assert listed[name].description == spec.description
        assert listed["memory_context"].input_schema == CONTEXT_TOOL["parameters"]

    _run(_store(tmp_path), body)


def test_save_search_context_and_errors(store_location: str) -> None:
    """On both backends (tests/conftest.py): the MCP server on a Postgres URL too."""

    async def body(session: ClientSession) -> None:
        saved = await session.call_tool("memory_save", {"content": "Alice is allergic to peanuts"})
        assert not saved.is_error, saved
        found = _payload(await session.call_tool("memory_search", {"query": "peanuts allergy"}))
        texts = json.dumps(found)
        assert "peanuts" in texts
        # Scoped to alice: Bob's memories never come back, whatever the query.
        for query in ("bank pin", "Porto", "lives"):
            assert "Bob" not in json.dumps(
                _payload(await session.call_tool("memory_search", {"query": query}))
            )
        context = _payload(
            await session.call_tool("memory_context", {"query": "is Alice allergic to peanuts?"})
        )
        assert "peanuts" in json.dumps(context["messages"])
        # Nothing of Bob's (not "4321" alone: a score's or timing's digits can hold it)
        for leaked in ("Bob", "bank pin", "Porto"):
            assert leaked not in json.dumps(context)
        bad = await session.call_tool("memory_search", {"query": 5})
        assert bad.is_error and _payload(bad)["code"] == "invalid_input"
        unknown = await session.call_tool("no_such_tool", {})
        assert unknown.is_error and _payload(unknown)["code"] == "unknown_tool"
        ctx_bad = await session.call_tool("memory_context", {"query": ""})
        assert ctx_bad.is_error and _payload(ctx_bad)["code"] == "invalid_input"
        await session.call_tool(
            "fact_set", {"category": "diet", "key": "allergy", "value": "peanuts"}
        )
        resources = {str(r.uri) for r in (await session.list_resources()).resources}
        assert resources == {"mindfile://facts", "mindfile://scratchpad", "mindfile://summary"}
        facts = await session.read_resource("mindfile://facts")
        assert "peanuts" in facts.contents[0].text and "Porto" not in facts.contents[0].text

    path = _store(store_location)
    _run(path, body)
    with mindfile.open(path) as mem:  # the server wrote into the store, as alice
        notes = mem.list_notes("memory:alice")
        assert [n.content for n in notes] == ["Alice is allergic to peanuts"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_streamable_http(tmp_path: Path) -> None:
    path = _store(tmp_path)
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mindfile",
            "mcp",
            "--db",
            str(path),
            "--user",
            "alice",
            "--transport",
            "streamable-http",
            "--port",
            str(port),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)

        async def main() -> None:
            url = f"http://127.0.0.1:{port}/mcp"
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                saved = await session.call_tool("memory_save", {"content": "Alice moved to Lisbon"})
                assert not saved.is_error
                found = await session.call_tool("memory_search", {"query": "Lisbon"})
                assert not found.is_error
                assert "Alice moved to Lisbon" in found.content[0].text

        asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        proc.terminate()
        proc.wait(10)


def test_refuses_to_serve_http_beyond_loopback(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mindfile",
            "mcp",
            "--db",
            str(tmp_path / "m.db"),
            "--transport",
            "streamable-http",
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 3  # ConfigError's exit code
    assert "refusing" in out.stderr
    assert not (tmp_path / "m.db").exists()
