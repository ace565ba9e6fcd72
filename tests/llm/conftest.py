"""Fixtures: the scripted OpenAI-compatible server (see ``_server.py``) and a client."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from mindfile.llm import OpenAICompatibleClient

from ._server import API_KEY, FakeOpenAIServer


@pytest.fixture
def llm_server() -> Iterator[FakeOpenAIServer]:
    """The scripted server, running in a background thread for one test."""
    server = FakeOpenAIServer()
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def llm(llm_server: FakeOpenAIServer) -> Iterator[OpenAICompatibleClient]:
    """A client for ``llm_server`` with an API key and tiny backoffs."""
    client = OpenAICompatibleClient(
        llm_server.base_url,
        model="test-model",
        api_key=API_KEY,
        timeout=2.0,
        max_retries=2,
        backoff=0.01,
        max_backoff=0.05,
    )
    with client:
        yield client
