"""Fixtures of the HTTP tests: one engine and one live server per module.

The server authenticates with a tokens file: alice, bob, and alice-as-"planner".
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import mindfile

if TYPE_CHECKING:
    from ._support import LiveServer

# Without the server extra these tests cannot run; the rest of the suite still does.
if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
    collect_ignore_glob = ["test_*.py"]

ALICE = "tok-alice-0123456789abcdef"
BOB = "tok-bob-0123456789abcdef00"
PLANNER = "tok-planner-0123456789abcd"  # alice, as the agent "planner" only


@pytest.fixture(scope="module")
def tokens_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("auth") / "tokens.json"
    path.write_text(
        json.dumps(
            {
                ALICE: {"user": "alice"},
                BOB: {"user": "bob"},
                PLANNER: {"user": "alice", "agents": ["planner"]},
            }
        )
    )
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[mindfile.Mindfile]:
    """The module's engine, on each backend: a store file, or a fresh schema of the
    session's Postgres server (the HTTP layer must behave the same on both)."""
    if request.param == "sqlite":
        with mindfile.open(tmp_path_factory.mktemp("db") / "http.db", embedder="hash") as mem:
            yield mem
        return
    pg_server = request.getfixturevalue("pg_server")
    url = pg_server.fresh_url()
    try:
        with mindfile.open(url, embedder="hash") as mem:
            yield mem
    finally:
        pg_server.drop(url)


@pytest.fixture(scope="module")
def server(engine: mindfile.Mindfile, tokens_file: Path) -> Iterator[LiveServer]:
    from mindfile.server import ServerSettings, load_tokens

    from ._support import LiveServer

    settings = ServerSettings(auth=load_tokens(tokens_file), engine=engine, threads=8)
    with LiveServer(settings) as live:
        yield live
