"""A real OpenAI-compatible HTTP server on loopback, scripted per test, and helpers.

:class:`FakeOpenAIServer` speaks ``POST /v1/chat/completions`` on 127.0.0.1 (an ephemeral port):
each request takes the next scripted :class:`Reply` (or ``default`` when the script is
empty) and is recorded in ``requests`` with its headers and JSON body.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import mindfile

API_KEY = "sk-test-SECRET-0123456789"


@dataclass
class Reply:
    """One scripted answer: a status, a body (dict as JSON, or raw text), headers, delay."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def chat(content: Any, *, finish_reason: str = "stop", model: str = "test-model") -> Reply:
    """A chat-completions answer whose message content is ``content``."""
    message = {"role": "assistant", "content": content}
    return Reply(
        body={
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }
    )


def chat_json(data: Any) -> Reply:
    """A chat answer whose content is ``data`` serialised as JSON."""
    return chat(json.dumps(data))


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


class FakeOpenAIServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.replies: deque[Reply] = deque()
        self.default: Reply | None = None
        self.requests: list[Recorded] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def next_reply(self, recorded: Recorded) -> Reply:
        with self.lock:
            self.requests.append(recorded)
            if self.replies:
                return self.replies.popleft()
        return self.default or Reply(status=500, body={"error": {"message": "unscripted"}})


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAIServer

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        recorded = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        if self.path != "/v1/chat/completions":
            with self.server.lock:
                self.server.requests.append(recorded)
            self._send(Reply(status=404, body={"error": {"message": "no such route"}}))
            return
        reply = self.server.next_reply(recorded)
        if reply.delay and self.server.stopping.wait(reply.delay):
            return  # the test is over: drop the hung request
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        if isinstance(reply.body, dict | list):
            data = json.dumps(reply.body).encode()
        else:
            data = str(reply.body or "").encode()
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a time-out test)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def snapshot(mem: mindfile.Mindfile) -> dict[str, Any]:
    """Every row a memory write can touch, for "nothing was stored" checks."""
    q = mem.db.query
    return {
        "sessions": q("SELECT session_id FROM sessions ORDER BY 1"),
        "events": q("SELECT * FROM conversation_events ORDER BY 1, 2"),
        "notes": q("SELECT * FROM notes ORDER BY 1, 2"),
        "chunks": q("SELECT id, session_id, chunk_text FROM chunks ORDER BY id"),
        "vectors": q("SELECT chunk_rowid FROM chunks_vec ORDER BY 1"),
        "facts": q("SELECT * FROM facts ORDER BY id"),
        "fact_history": q("SELECT * FROM fact_history ORDER BY id"),
    }
