"""The routes: ``/v1/...`` (authenticated, confined to the caller's user) and the service
routes ``/healthz`` and ``/metrics``.

Every handler is a plain ``def`` (run in a worker thread) that calls one engine method
with ``user_id=`` the caller's user where the method takes one, after
:func:`own_session` has checked that a named session is the caller's: a session of
another user (or one without a user) answers exactly like a missing one, 404.
Notes live in the caller's ``memory:{user}`` namespace, facts in scope ``{user}``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.responses import PlainTextResponse

import mindfile
from mindfile.context import ContextConfig, RerankWeights
from mindfile.engine import Mindfile
from mindfile.errors import ConfigError, InvalidInputError, NotFoundError
from mindfile.index.pipeline import check_id
from mindfile.memory import notes_session
from mindfile.server.app import Reply, ServerMetrics, engine_of, reply
from mindfile.server.auth import Principal, UnauthorizedError
from mindfile.server.errors import no_session
from mindfile.server.models import (
    ContextConfigIn,
    ContextIn,
    ErrorBody,
    EventsBatch,
    EventsBody,
    FactIn,
    FilesSearchIn,
    NoteIn,
    NoteSearchIn,
    ScratchpadIn,
    SearchIn,
)
from mindfile.storage import log as _log
from mindfile.storage.db import utcnow
from mindfile.tools import ToolContext
from mindfile.tools.memory_tools import files_search

__all__ = ["ERROR_RESPONSES", "Caller", "build_router", "build_service_router", "own_session"]

#: What the OpenAPI document says every ``/v1`` route may answer besides success.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": what}
    for status, what in (
        (400, "invalid_input: a malformed body or parameter, or a value the engine refuses"),
        (401, "unauthorized: no valid bearer token"),
        (403, "forbidden: an agent identity this token may not use"),
        (404, "not_found: missing, or another user's (the same answer)"),
        (409, "conflict / scope_conflict / read_only"),
        (413, "limit_exceeded: the body or an input is over a limit"),
        (500, "internal (details in the server log), or the engine's own failure"),
    )
}


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated request: the engine, who is calling, the metrics."""

    engine: Mindfile
    principal: Principal
    metrics: ServerMetrics

    @property
    def user(self) -> str:
        return self.principal.user_id


def _check_token(request: Request) -> Principal:
    """The caller of a request, or :class:`UnauthorizedError` (401)."""
    auth = request.app.state.settings.auth
    principal: Principal | None = auth.authenticate(request.headers.get("authorization"))
    if principal is None:
        raise UnauthorizedError("a valid bearer token is required (Authorization: Bearer ...)")
    request.state.principal = principal
    return principal


async def authenticate(request: Request) -> Caller:
    """The dependency of every ``/v1`` route: 401 unless the bearer token is known.

    ``async`` on purpose: a hash and a few comparisons are not worth a thread hop."""
    principal = _check_token(request)
    return Caller(engine_of(request), principal, request.app.state.metrics)


CallerDep = Annotated[Caller, Depends(authenticate)]


def own_session(caller: Caller, session_id: str, *, must_exist: bool) -> bool:
    """Whether ``session_id`` exists; it must be the caller's when it does.

    A session of another user, a namespace of another user (``memory:bob``) and a
    session with no user at all (written by the library without ``user_id``) are all
    reported as :func:`~mindfile.server.errors.no_session`, the error of a missing
    session when ``must_exist``. A missing session is fine otherwise (a write creates
    it for the caller).
    """
    check_id(session_id, "session_id")
    owner = _log.namespace_user(session_id)
    if owner is not None and owner != caller.user:
        raise no_session(session_id)
    scope = caller.engine.stores.sessions.scope(session_id)
    if scope is None:
        if must_exist:
            raise no_session(session_id)
        return False
    if scope[0] != caller.user:
        raise no_session(session_id)
    return True


def _claim_session(caller: Caller, session_id: str) -> None:
    """Create the session for the caller (or adopt it) before a write that does not
    name a user itself (the scratchpad), so no other user can ever read it."""
    if own_session(caller, session_id, must_exist=False):
        return
    engine = caller.engine
    with engine.db.atomic():
        engine.stores.sessions.upsert(session_id, utcnow(), user_id=caller.user, touch=False)


def build_router() -> APIRouter:
    """The ``/v1`` API."""
    router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES)

    # -- conversation log --------------------------------------------------------------

    @router.post("/sessions/{session_id}/events", status_code=201, tags=["sessions"])
    def store_events(
        session_id: str,
        body: Annotated[EventsBody, Body()],
        caller: CallerDep,
    ) -> Reply:
        """Store one event, or several in one transaction (all or nothing).

        Body: one event `{"sequence", "payload", "metadata"?, "tags"?}` or
        `{"events": [...]}`, with the optional `agent_identity`, `channel`,
        `importance`, `ttl` (seconds). Sequences must grow (409 `conflict` otherwise).
        """
        own_session(caller, session_id, must_exist=False)
        events = body.events if isinstance(body, EventsBatch) else [body]
        items = []
        for event in events:
            meta = dict(event.metadata or {})
            if event.tags is not None:
                meta["tags"] = event.tags
            items.append((session_id, event.sequence, event.payload, meta or None))
        added = caller.engine.store_many(
            items,
            agent_identity=caller.principal.agent(body.agent_identity),
            user_id=caller.user,
            channel=body.channel,
            importance=body.importance,
            ttl=body.ttl,
        )
        return reply({"session_id": session_id, "stored": len(items), "chunks_added": added}, 201)

    @router.get("/sessions/{session_id}/events", tags=["sessions"])
    def recall_events(
        session_id: str,
        caller: CallerDep,
        limit: Annotated[int | None, Query(ge=0, description="Only the last N.")] = None,
    ) -> Reply:
        """The session's events in sequence order (the last `limit` when given)."""
        own_session(caller, session_id, must_exist=True)
        records = caller.engine.recall(session_id, limit, user_id=caller.user)
        return reply({"session_id": session_id, "events": [r.to_dict() for r in records]})

    @router.delete("/sessions/{session_id}", tags=["sessions"])
    def forget_session(session_id: str, caller: CallerDep) -> Reply:
        """Delete the session and everything derived from it."""
        own_session(caller, session_id, must_exist=True)
        if not caller.engine.forget(session_id):
            raise no_session(session_id)
        return reply({"session_id": session_id, "deleted": True})

    @router.get("/sessions", tags=["sessions"])
    def list_sessions(caller: CallerDep, channel: Annotated[str | None, Query()] = None) -> Reply:
        """The caller's sessions, most recently updated first."""
        sessions = caller.engine.list_sessions(user_id=caller.user, channel=channel)
        return reply({"sessions": [s.to_dict() for s in sessions]})

    # -- retrieval -----------------------------------------------------------------------

    @router.post("/search", tags=["retrieval"])
    def search(body: SearchIn, caller: CallerDep) -> Reply:
        """Hybrid / vector / full-text search over the caller's sessions."""
        weights = body.weights
        start = time.perf_counter()
        results = caller.engine.search(
            body.query,
            session_id=body.session_id,
            tags=body.tags,
            top_k=body.top_k,
            mode=body.mode,
            fusion=body.fusion,
            vector_weight=None if weights is None else weights.vector,
            fts_weight=None if weights is None else weights.fts,
            min_score=body.min_score,
            query_embedding=body.query_embedding,
            candidates=body.candidates,
            user_id=caller.user,
            channel=body.channel,
            rerank=body.rerank,
        )
        caller.metrics.search_latency.observe(time.perf_counter() - start, results.mode)
        if results.degraded:
            caller.metrics.degraded.inc(results.mode)
        return reply(results.to_dict())

    @router.post("/context", tags=["retrieval"])
    def build_context(body: ContextIn, caller: CallerDep) -> Reply:
        """The prompt context for the next turn of a session, within `token_budget`."""
        own_session(caller, body.session_id, must_exist=False)
        context = caller.engine.build_context(
            body.session_id,
            body.query,
            token_budget=body.token_budget,
            user_id=caller.user,
            agent_identity=caller.principal.agent(body.agent_identity),
            channel=body.channel,
            system_prompt=body.system_prompt,
            tools=body.tools,
            reserve_system=body.reserve_system,
            reserve_tools=body.reserve_tools,
            config=_context_config(body.config),
            query_embedding=body.query_embedding,
        )
        return reply(context.to_dict())

    # -- notes -----------------------------------------------------------------------------

    @router.put("/notes/{note_id}", tags=["notes"])
    def put_note(note_id: str, body: NoteIn, caller: CallerDep) -> Reply:
        """Create or replace a note (a replaced note keeps its `created_at`)."""
        note = caller.engine.store_note(
            notes_session(caller.user),
            note_id,
            body.content,
            source=body.source,
            tags=body.tags,
            importance=body.importance,
            ttl=body.ttl,
        )
        return reply(note.to_dict())

    @router.get("/notes/{note_id}", tags=["notes"])
    def get_note(note_id: str, caller: CallerDep) -> Reply:
        """One note."""
        note = caller.engine.get_note(notes_session(caller.user), note_id)
        if note is None:
            raise NotFoundError(f"no note {note_id!r}", note_id=note_id)
        return reply(note.to_dict())

    @router.delete("/notes/{note_id}", tags=["notes"])
    def delete_note(note_id: str, caller: CallerDep) -> Reply:
        """Delete a note with its chunks and vectors."""
        if not caller.engine.delete_note(notes_session(caller.user), note_id):
            raise NotFoundError(f"no note {note_id!r}", note_id=note_id)
        return reply({"note_id": note_id, "deleted": True})

    @router.get("/notes", tags=["notes"])
    def list_notes(
        caller: CallerDep,
        tags: Annotated[list[str] | None, Query(description="Notes with all these.")] = None,
        limit: Annotated[int, Query()] = 50,
        offset: Annotated[int, Query()] = 0,
    ) -> Reply:
        """The caller's notes, most recently written first."""
        notes = caller.engine.list_notes(
            notes_session(caller.user), tags=tags, limit=limit, offset=offset
        )
        return reply({"notes": [n.to_dict() for n in notes]})

    @router.post("/files/search", tags=["files"])
    def search_files(body: FilesSearchIn, caller: CallerDep) -> Reply:
        """Search the files synced into the store (``mindfile sync``): path and lines.

        Synced files belong to the store, not to a user: every caller may search them.
        """
        args: dict[str, Any] = {"query": body.query, "top_k": body.top_k}
        if body.path is not None:
            args["path"] = body.path
        return reply(files_search(caller.engine, args, ToolContext(caller.user, "http")))

    @router.post("/notes/search", tags=["notes"])
    def search_notes(body: NoteSearchIn, caller: CallerDep) -> Reply:
        """Hybrid search over the caller's notes (and facts): one hit per item."""
        hits = caller.engine.search_notes(
            notes_session(caller.user),
            body.query,
            tags=body.tags,
            top_k=body.top_k,
            facts_scope=caller.user if body.include_facts else None,
        )
        return reply({"results": [h.to_dict() for h in hits]})

    # -- facts -----------------------------------------------------------------------------

    @router.put("/facts/{category}/{key}", tags=["facts"])
    def put_fact(category: str, key: str, body: FactIn, caller: CallerDep) -> Reply:
        """Set a fact; a different previous value moves to its history."""
        fact = caller.engine.set_fact(caller.user, category, key, body.value, source=body.source)
        return reply(fact.to_dict())

    @router.get("/facts/{category}/{key}", tags=["facts"])
    def get_fact(
        category: str,
        key: str,
        caller: CallerDep,
        history: Annotated[bool, Query(description="Add the earlier values.")] = False,
    ) -> Reply:
        """One fact (with `?history=true`, its earlier values too)."""
        fact = caller.engine.get_fact(caller.user, category, key)
        if fact is None:
            raise NotFoundError(f"no fact {category!r}/{key!r}", category=category, key=key)
        out = fact.to_dict()
        if history:
            versions = caller.engine.fact_history(caller.user, category, key)
            out["history"] = [v.to_dict() for v in versions]
        return reply(out)

    @router.delete("/facts/{category}/{key}", tags=["facts"])
    def delete_fact(
        category: str,
        key: str,
        caller: CallerDep,
        keep_history: Annotated[bool, Query()] = False,
    ) -> Reply:
        """Delete a fact and its history (`?keep_history=true`: retire it instead)."""
        if not caller.engine.delete_fact(caller.user, category, key, keep_history=keep_history):
            raise NotFoundError(f"no fact {category!r}/{key!r}", category=category, key=key)
        return reply({"category": category, "key": key, "deleted": True})

    @router.get("/facts", tags=["facts"])
    def list_facts(caller: CallerDep, category: Annotated[str | None, Query()] = None) -> Reply:
        """The caller's facts, by category then key."""
        facts = caller.engine.list_facts(caller.user, category=category)
        return reply({"facts": [f.to_dict() for f in facts]})

    # -- scratchpad and summary ------------------------------------------------------------

    @router.get("/sessions/{session_id}/scratchpad", tags=["sessions"])
    def read_scratchpad(session_id: str, caller: CallerDep) -> Reply:
        """The session's working-memory scratchpad."""
        own_session(caller, session_id, must_exist=True)
        state = caller.engine.read_scratchpad(session_id)
        if state is None:
            raise NotFoundError(f"session {session_id!r} has no scratchpad")
        return reply(state.to_dict())

    @router.put("/sessions/{session_id}/scratchpad", tags=["sessions"])
    def write_scratchpad(session_id: str, body: ScratchpadIn, caller: CallerDep) -> Reply:
        """Replace the scratchpad (creates the session for the caller if it is new)."""
        _claim_session(caller, session_id)
        return reply(caller.engine.write_scratchpad(session_id, body.items).to_dict())

    @router.delete("/sessions/{session_id}/scratchpad", tags=["sessions"])
    def clear_scratchpad(session_id: str, caller: CallerDep) -> Reply:
        """Remove the scratchpad."""
        own_session(caller, session_id, must_exist=True)
        if not caller.engine.clear_scratchpad(session_id):
            raise NotFoundError(f"session {session_id!r} has no scratchpad")
        return reply({"session_id": session_id, "deleted": True})

    @router.get("/sessions/{session_id}/summary", tags=["sessions"])
    def read_summary(session_id: str, caller: CallerDep) -> Reply:
        """The session's rolling summary state."""
        own_session(caller, session_id, must_exist=True)
        state = caller.engine.read_summary_state(session_id)
        if state is None:
            raise NotFoundError(f"session {session_id!r} has no summary")
        return reply({"session_id": session_id, **state.to_dict()})

    return router


def _context_config(config: ContextConfigIn | None) -> ContextConfig | None:
    """A :class:`ContextConfig` from the request; bad values are the client's (400)."""
    if config is None:
        return None
    values = config.model_dump(exclude_unset=True)
    try:
        if config.weights is not None:
            values["weights"] = RerankWeights(**config.weights.model_dump())
        return ContextConfig(**values)
    except ConfigError as exc:
        raise InvalidInputError(f"config: {exc.message}") from exc


def build_service_router() -> APIRouter:
    """``/healthz`` (no auth) and ``/metrics`` (a token unless ``public_metrics``)."""
    router = APIRouter(tags=["service"])

    @router.get("/healthz")
    async def healthz(request: Request) -> Reply:
        """Liveness: the store is open (503 otherwise). No auth, no data."""
        engine: Mindfile | None = getattr(request.app.state, "engine", None)
        ok = engine is not None and not engine.db.closed
        body = {"status": "ok" if ok else "unavailable", "version": mindfile.__version__}
        return reply(body, 200 if ok else 503)

    @router.get("/metrics", response_class=PlainTextResponse)
    def metrics(request: Request) -> PlainTextResponse:
        """Prometheus text format (docs/http.md "Metrics")."""
        if not request.app.state.settings.public_metrics:
            _check_token(request)
        text = request.app.state.metrics.render()
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    return router
