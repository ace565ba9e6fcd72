"""A real uvicorn server on a free loopback port, in a background thread."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

import httpx
import uvicorn

from mindfile.server import ServerSettings, create_app

from .conftest import ALICE, BOB, PLANNER

__all__ = ["ALICE", "BOB", "PLANNER", "LiveServer"]


class LiveServer:
    """``with LiveServer(settings) as srv: httpx.get(srv.url + "/healthz")``."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.app = create_app(settings)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        self.sock.close()

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)
