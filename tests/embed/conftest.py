"""The embedding-provider server (``_server.py``), one per test."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from ._server import EmbeddingServer


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    srv = EmbeddingServer()
    thread = threading.Thread(target=srv.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.stopping.set()
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)
