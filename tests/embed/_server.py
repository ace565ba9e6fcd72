"""A real HTTP server on loopback that speaks four embedding providers' wire formats.

Routes: OpenAI-compatible and Voyage ``POST /v1/embeddings``, Ollama ``POST /api/embed``,
Gemini ``POST /v1beta/models/{model}:batchEmbedContents``. Vectors are deterministic
(the hash embedder of the request text, ``dims`` wide, or what the test forces). A test
can script failures for the next requests (``fail``: status, body, headers, delay) and
can corrupt answers (``mode``). Every request is recorded with its headers and body.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mindfile.embed import HashEmbedder

KEY = "sk-embed-SECRET-0123456789"


@dataclass
class Failure:
    status: int = 500
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any


class EmbeddingServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, dims: int = 16) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.dims = dims
        self.hash = HashEmbedder(dims)
        self.failures: deque[Failure] = deque()
        self.requests: list[Seen] = []
        #: "ok", "nan", "short" (wrong dimensions), "fewer" (one vector missing),
        #: "garbage" (not JSON), "reversed" (OpenAI indexes given, list reversed)
        self.mode = "ok"
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def vectors(self, texts: list[str]) -> list[list[float]]:
        rows = [[float(x) for x in v] for v in self.hash.embed_documents(texts)]
        if self.mode == "nan":
            rows[0][0] = float("nan")
        elif self.mode == "short":
            rows = [r[:-1] for r in rows]
        elif self.mode == "fewer":
            rows = rows[:-1]
        return rows


class _Handler(BaseHTTPRequestHandler):
    server: EmbeddingServer

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.loads(raw)
        seen = Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        with self.server.lock:
            self.server.requests.append(seen)
            failure = self.server.failures.popleft() if self.server.failures else None
        if failure is not None:
            if failure.delay and self.server.stopping.wait(failure.delay):
                return
            self._send(failure.status, failure.body or {"error": "scripted"}, failure.headers)
            return
        if self.server.mode == "garbage":
            self._send(200, "this is not json {", {})
            return
        path = self.path
        if path == "/v1/embeddings" and "input_type" in body:  # Voyage
            rows = self.server.vectors(body["input"])
            data = [{"object": "embedding", "embedding": r, "index": i} for i, r in enumerate(rows)]
            self._send(200, {"object": "list", "data": data, "model": body["model"]}, {})
        elif path == "/v1/embeddings":  # OpenAI-compatible
            rows = self.server.vectors(body["input"])
            if "dimensions" in body:
                rows = [r[: body["dimensions"]] for r in rows]
            data = [{"object": "embedding", "embedding": r, "index": i} for i, r in enumerate(rows)]
            if self.server.mode == "reversed":
                data.reverse()
            self._send(200, {"object": "list", "data": data, "model": body["model"]}, {})
        elif path == "/api/embed":  # Ollama
            rows = self.server.vectors(body["input"])
            self._send(200, {"model": body["model"], "embeddings": rows}, {})
        elif path.startswith("/v1beta/models/") and path.endswith(":batchEmbedContents"):
            texts = [r["content"]["parts"][0]["text"] for r in body["requests"]]
            rows = self.server.vectors(texts)
            self._send(200, {"embeddings": [{"values": r} for r in rows]}, {})
        else:
            self._send(404, {"error": "no such route"}, {})

    def _send(self, status: int, body: Any, headers: dict[str, str]) -> None:
        data = (json.dumps(body) if isinstance(body, dict | list) else str(body)).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass
