"""The FastAPI application: lifespan (one engine), auth, errors, body limit, metrics.

:func:`create_app` builds the app from :class:`ServerSettings`; the routes are in
:mod:`mindfile.server.routes`. Route handlers are plain ``def`` functions: FastAPI runs
them in anyio's worker threads, whose number the lifespan sets (``threads``), and the
one :class:`~mindfile.Mindfile` they share is thread-safe.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

import mindfile
from mindfile.engine import Mindfile
from mindfile.errors import LimitExceededError, MindfileError, ScopeError
from mindfile.server.auth import Authenticator, ForbiddenError, Principal, is_loopback
from mindfile.server.errors import error_body, error_response, no_session
from mindfile.server.metrics import Counter, Gauge, Histogram, Labels, Registry

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "Reply",
    "ServerMetrics",
    "ServerSettings",
    "create_app",
    "reply",
]

logger = logging.getLogger("mindfile.server")

#: 16 MiB: far above any real request (a payload is at most 1 MB), far below trouble.
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Reply(Response):
    """A JSON response serialised with :func:`json.dumps` straight from the engine's
    ``to_dict()`` values (plain JSON types already): FastAPI's ``jsonable_encoder``
    would walk every hit again (docs/http.md "Performance")."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json.dumps(
            content, ensure_ascii=False, allow_nan=False, separators=(",", ":")
        ).encode("utf-8")


def reply(content: Any, status_code: int = 200) -> Reply:
    """A :class:`Reply` of ``content``."""
    return Reply(content, status_code=status_code)


def default_threads() -> int:
    """Worker threads for request handlers: 4 per CPU, at least 4, at most 32.

    The engine serialises SQLite statements on its one connection, but embedding and
    vector scoring (numpy) release the GIL, so a few threads per core keep the CPUs
    busy while others wait on the connection; more only queue."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(4, min(32, 4 * (cpus or 1)))


@dataclass
class ServerSettings:
    """What :func:`create_app` needs.

    ``db_path`` is opened at startup with ``embedder``/``read_only``/``indexing`` and
    closed at shutdown; or pass an open ``engine``, which the server closes at shutdown
    only with ``close_engine=True`` (``mindfile serve`` opens the store itself first, so
    a bad store is a one-line error before anything listens).
    ``indexing="background"`` also runs an :class:`~mindfile.jobs.IndexWorker`.
    ``public_metrics`` serves ``/metrics`` without a token.
    """

    db_path: str = ":memory:"
    auth: Authenticator = field(default_factory=Authenticator.none)
    embedder: str | None = None
    read_only: bool = False
    indexing: Literal["sync", "background"] = "sync"
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    threads: int = field(default_factory=default_threads)
    public_metrics: bool = False
    engine: Mindfile | None = None
    close_engine: bool = False
    #: Refuse requests whose ``Host`` is not a loopback name (DNS rebinding: a web page
    #: of evil.example resolving to 127.0.0.1). None: when there is no auth.
    loopback_hosts_only: bool | None = None


class ServerMetrics:
    """The series of ``GET /metrics`` (docs/http.md "Metrics")."""

    def __init__(self, engine: Callable[[], Mindfile | None]) -> None:
        self._engine = engine
        self.registry = Registry()
        add = self.registry.add
        self.requests = add(
            Counter(
                "mindfile_http_requests_total",
                "HTTP requests by method, route template and status code.",
                ("method", "route", "status"),
            )
        )
        self.latency = add(
            Histogram(
                "mindfile_http_request_duration_seconds",
                "HTTP request latency (until the response is sent) by method and route.",
                ("method", "route"),
            )
        )
        self.in_flight = 0
        add(
            Gauge(
                "mindfile_http_requests_in_flight",
                "HTTP requests being served now.",
                source=lambda: [((), float(self.in_flight))],
            )
        )
        self.search_latency = add(
            Histogram(
                "mindfile_search_duration_seconds",
                "Engine time of POST /v1/search by the mode that ran.",
                ("mode",),
            )
        )
        self.degraded = add(
            Counter(
                "mindfile_search_degraded_total",
                "Searches that could not run as asked (e.g. the embedder failed: full-text "
                "only), by the mode that ran.",
                ("mode",),
            )
        )
        for mode in ("hybrid", "vector", "fts"):  # every series exists from the start
            self.degraded.inc(mode, amount=0.0)
        add(
            Gauge(
                "mindfile_jobs",
                "Background indexing jobs by status (due: runnable now).",
                ("status",),
                source=self._jobs,
            )
        )
        add(
            Gauge(
                "mindfile_jobs_lag_seconds",
                "Age of the oldest pending or running indexing job (0: none).",
                source=self._lag,
            )
        )
        add(
            Gauge(
                "mindfile_build_info",
                "The Mindfile version serving.",
                ("version",),
                source=lambda: [((mindfile.__version__,), 1.0)],
            )
        )

    def _jobs(self) -> list[tuple[Labels, float]]:
        engine = self._engine()
        if engine is None or engine.db.closed:
            return []
        s = engine.job_status()
        counts = {
            "pending": s.pending,
            "running": s.running,
            "done": s.done,
            "failed": s.failed,
            "due": s.due,
        }
        return [((k,), float(v)) for k, v in counts.items()]

    def _lag(self) -> list[tuple[Labels, float]]:
        engine = self._engine()
        if engine is None or engine.db.closed:
            return []
        oldest = engine.job_status().oldest_pending_at
        if oldest is None:
            return [((), 0.0)]
        try:
            since = datetime.fromisoformat(oldest)
        except ValueError:
            return []
        if since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
        return [((), max(0.0, (datetime.now(UTC) - since).total_seconds()))]

    def render(self) -> str:
        return self.registry.render()


class Guard:
    """The outermost middleware of the app: the body limit, request metrics, and the
    catch-all 500 (logged with its traceback, never sent to the client)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        metrics: ServerMetrics,
        loopback_hosts_only: bool = False,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.metrics = metrics
        self.loopback_hosts_only = loopback_hosts_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 0, "started": False}

        async def send_tracked(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
                status["started"] = True
            await send(message)

        self.metrics.in_flight += 1
        try:
            if self.loopback_hosts_only and not _loopback_host(scope):
                await _send_error(
                    send_tracked,
                    ForbiddenError(
                        "this server has no authentication and answers only requests "
                        "addressed to localhost / 127.0.0.1 / [::1]"
                    ),
                )
                return
            body = await self._read_body(scope, receive)
            if body is None:
                await _send_error(send_tracked, LimitExceededError(self._too_large()))
                return
            try:
                await self.app(scope, _replay(body, receive), send_tracked)
            except Exception:
                logger.exception("%s %s failed", scope.get("method"), scope.get("path"))
                if status["started"]:
                    raise
                await _send_json(
                    send_tracked,
                    500,
                    error_body("internal", "the server failed unexpectedly; see its log"),
                )
        finally:
            self.metrics.in_flight -= 1
            route = scope.get("route")
            template = getattr(route, "path", None) or "<unmatched>"
            method = str(scope.get("method", ""))
            self.metrics.requests.inc(method, template, str(status["code"]))
            self.metrics.latency.observe(time.perf_counter() - start, method, template)

    def _too_large(self) -> str:
        return f"the request body is larger than {self.max_body_bytes} bytes"

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes | None:
        """The whole body, or None when it is over the limit (declared or streamed)."""
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    continue
                if declared > self.max_body_bytes:
                    if declared <= DRAIN_BYTES:
                        await _discard(receive)
                    return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # disconnected
                return b"".join(chunks)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                if message.get("more_body", False):
                    await _discard(receive)
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


#: An over-limit upload is read (and dropped) up to this size before the 413 goes out:
#: closing a connection whose upload is still arriving resets it, and the client loses
#: the answer. Larger uploads are answered at once and the connection closed.
DRAIN_BYTES = 64 * 1024 * 1024


async def _discard(receive: Receive) -> None:
    """Read and drop the rest of a request body, up to ``DRAIN_BYTES``."""
    seen = 0
    while seen <= DRAIN_BYTES:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return
        seen += len(message.get("body", b""))


def _loopback_host(scope: Scope) -> bool:
    """Whether the request's ``Host`` header names this machine (or is absent)."""
    for name, value in scope.get("headers", []):
        if name == b"host":
            host = value.decode("latin-1").strip()
            if host.startswith("["):  # [::1]:8765
                host = host[1 : host.find("]")] if "]" in host else host
            elif host.count(":") == 1:
                host = host.split(":", 1)[0]
            return is_loopback(host)
    return True


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if status == 413:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


async def _send_error(send: Send, exc: MindfileError) -> None:
    await _send_json(send, exc.http_status, error_body(exc.code, exc.message))


def engine_of(request: Request) -> Mindfile:
    """The app's one engine."""
    engine: Mindfile = request.app.state.engine
    return engine


def principal_of(request: Request) -> Principal | None:
    """The caller, once authenticated (None before)."""
    return getattr(request.state, "principal", None)


_NOT_AN_OBJECT = ("model_attributes_type", "dict_type", "model_type")


def _validation_message(request: Request, exc: RequestValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "invalid request"
    first = errors[0]
    kind = str(first.get("type", ""))
    if kind == "json_invalid":
        return f"the body is not valid JSON: {first.get('msg', '')}".rstrip(": ")
    content_type = request.headers.get("content-type", "")
    if kind in _NOT_AN_OBJECT and content_type and "json" not in content_type.lower():
        return f"send a JSON body with Content-Type: application/json (not {content_type!r})"
    where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body",))
    message = str(first.get("msg", "invalid value"))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {message}{more}" if where else f"{message}{more}"


def _install_error_handlers(app: FastAPI) -> None:
    async def on_mindfile_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, MindfileError)
        if isinstance(exc, ScopeError):
            return await anyio.to_thread.run_sync(_scope_error, request, exc)
        return error_response(exc.http_status, exc.code, exc.message)

    async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error_response(400, "invalid_input", _validation_message(request, exc))

    async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        message = {404: "no such route", 405: "method not allowed on this route"}.get(
            exc.status_code, str(exc.detail)
        )
        return error_response(exc.status_code, code, message, dict(exc.headers or {}))

    app.add_exception_handler(MindfileError, on_mindfile_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)


def _scope_error(request: Request, exc: ScopeError) -> JSONResponse:
    """Another user's session reads as missing (404); a conflict on the caller's own
    session (e.g. another channel) stays a 409."""
    session_id = exc.details.get("session_id")
    caller = principal_of(request)
    if isinstance(session_id, str) and caller is not None:
        scope = engine_of(request).stores.sessions.scope(session_id)
        if scope is not None and scope[0] == caller.user_id:
            return error_response(exc.http_status, exc.code, exc.message)
    missing = no_session(session_id if isinstance(session_id, str) else "?")
    return error_response(missing.http_status, missing.code, missing.message)


def create_app(settings: ServerSettings | None = None) -> FastAPI:
    """The HTTP API over one store (docs/http.md)."""
    from mindfile.server.routes import build_router, build_service_router

    settings = settings or ServerSettings()
    state: dict[str, Any] = {"engine": settings.engine}
    metrics = ServerMetrics(lambda: state["engine"])

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = settings.threads
        owned = settings.engine is None or settings.close_engine
        engine = settings.engine
        if engine is None:
            engine = await anyio.to_thread.run_sync(_open, settings)
        if engine.lexical is not None:  # build the BM25 index now, not on the first search
            engine.lexical.warm()
        worker = None
        if settings.indexing == "background" and not engine.read_only:
            from mindfile.jobs import IndexWorker

            worker = IndexWorker(engine, name="mindfile-serve").start()
        state["engine"] = engine
        app.state.engine = engine
        app.state.worker = worker
        logger.info("serving %s (%s)", engine.path, engine.embedder.model_id)
        try:
            yield
        finally:
            if worker is not None:
                await anyio.to_thread.run_sync(worker.stop)
            if owned:
                await anyio.to_thread.run_sync(engine.close)
            state["engine"] = None

    app = FastAPI(
        title="Mindfile",
        version=mindfile.__version__,
        summary="Long-term memory for LLM agents, over HTTP.",
        description="Every `/v1` route needs `Authorization: Bearer <token>` (unless the "
        "server runs without auth on loopback) and is confined to the token's user. "
        'Errors are `{"error": {"code", "message"}}`. See docs/http.md.',
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    app.state.engine = settings.engine
    _install_error_handlers(app)
    app.include_router(build_router())
    app.include_router(build_service_router())
    loopback_only = settings.loopback_hosts_only
    app.add_middleware(
        Guard,
        max_body_bytes=settings.max_body_bytes,
        metrics=metrics,
        loopback_hosts_only=not settings.auth.required if loopback_only is None else loopback_only,
    )
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document without its 422 responses: validation errors are 400s here."""
    if app.openapi_schema is None:
        doc = get_openapi(
            title=app.title,
            version=app.version,
            summary=app.summary,
            description=app.description,
            routes=app.routes,
        )
        for operations in doc.get("paths", {}).values():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
        schemas = doc.get("components", {}).get("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        app.openapi_schema = doc
    return app.openapi_schema


def _open(settings: ServerSettings) -> Mindfile:
    return mindfile.open(
        settings.db_path,
        embedder=settings.embedder,
        read_only=settings.read_only,
        indexing=settings.indexing,
    )
