"""Auth and user confinement: tokens, 401/403, and two users who never see each other."""

from __future__ import annotations

import httpx
import pytest

import mindfile

from ._support import ALICE, BOB, PLANNER, LiveServer

SECRET_A = "alpha-orchid"
SECRET_B = "bravo-walrus"


def _code(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


@pytest.fixture(scope="module")
def two_users(server: LiveServer) -> LiveServer:
    """Alice and Bob write the same words about their gardens, each with a secret."""
    with server.client(ALICE) as alice, server.client(BOB) as bob:
        for client, sid, secret in ((alice, "a-garden", SECRET_A), (bob, "b-garden", SECRET_B)):
            client.post(
                f"/v1/sessions/{sid}/events",
                json={
                    "events": [
                        {"sequence": 1, "payload": f"my garden gate code is {secret}"},
                        {"sequence": 2, "payload": "the garden has roses and a gate"},
                    ]
                },
            ).raise_for_status()
            client.put(
                "/v1/notes/garden", json={"content": f"garden gate note {secret}"}
            ).raise_for_status()
            client.put("/v1/facts/garden/gate", json={"value": secret}).raise_for_status()
            client.put(
                f"/v1/sessions/{sid}/scratchpad", json={"items": [f"check gate {secret}"]}
            ).raise_for_status()
    return server


def test_no_or_bad_token_is_401(server: LiveServer) -> None:
    for headers in (
        {},
        {"Authorization": "Bearer not-a-real-token-at-all"},
        {"Authorization": f"Basic {ALICE}"},
        {"Authorization": "Bearer"},
        {"Authorization": f"Bearer {ALICE}x"},
    ):
        response = httpx.get(server.url + "/v1/sessions", headers=headers)
        assert _code(response) == (401, "unauthorized"), headers
        assert response.headers["www-authenticate"] == "Bearer"
    ok = httpx.get(server.url + "/v1/sessions", headers={"Authorization": f"bearer {ALICE}"})
    assert ok.status_code == 200
    assert httpx.get(server.url + "/healthz").status_code == 200  # no token needed


@pytest.mark.parametrize("route", ["/v1/search", "/v1/notes/search"])
def test_search_never_crosses_users(two_users: LiveServer, route: str) -> None:
    for token, mine, theirs in ((ALICE, SECRET_A, SECRET_B), (BOB, SECRET_B, SECRET_A)):
        with two_users.client(token) as client:
            body = client.post(route, json={"query": f"garden gate code {theirs}", "top_k": 50})
            assert body.status_code == 200, body.text
            assert theirs not in body.text
            assert mine in body.text


def test_naming_another_users_session_in_a_search_finds_nothing(two_users: LiveServer) -> None:
    with two_users.client(ALICE) as alice:
        for sids in ("b-garden", ["b-garden", "memory:bob", "facts:bob"], "never-made"):
            found = alice.post("/v1/search", json={"query": "garden gate", "session_id": sids})
            assert found.status_code == 200 and found.json()["hits"] == [], sids


def test_context_never_crosses_users(two_users: LiveServer) -> None:
    with two_users.client(ALICE) as alice:
        for sid in ("a-garden", "a-new-chat"):
            ctx = alice.post(
                "/v1/context",
                json={"session_id": sid, "query": "garden gate code", "token_budget": 2000},
            )
            assert ctx.status_code == 200, ctx.text
            assert SECRET_B not in ctx.text
        assert SECRET_A in ctx.text  # her own memory does come back in a new chat


def test_other_users_session_is_404_like_a_missing_one(two_users: LiveServer) -> None:
    theirs = ("b-garden", "memory:bob", "facts:bob")
    reads = (
        ("GET", "/v1/sessions/{}/events"),
        ("DELETE", "/v1/sessions/{}"),
        ("GET", "/v1/sessions/{}/scratchpad"),
        ("DELETE", "/v1/sessions/{}/scratchpad"),
        ("GET", "/v1/sessions/{}/summary"),
    )
    writes = (
        ("POST", "/v1/sessions/{}/events", {"sequence": 9, "payload": "hi"}),
        ("PUT", "/v1/sessions/{}/scratchpad", {"items": ["mine now"]}),
    )
    with two_users.client(ALICE) as alice:
        for method, path in reads:
            for sid in (*theirs, "never-made"):
                response = alice.request(method, path.format(sid))
                assert response.status_code == 404, (method, path, sid)
                assert response.json() == {
                    "error": {"code": "not_found", "message": f"no session {sid!r}"}
                }, (method, path, sid)
        for method, path, body in writes:
            for sid in theirs:
                response = alice.request(method, path.format(sid), json=body)
                assert response.json() == {
                    "error": {"code": "not_found", "message": f"no session {sid!r}"}
                }, (method, path, sid)
                assert response.status_code == 404
        for sid in theirs:
            ctx = alice.post(
                "/v1/context", json={"session_id": sid, "query": "g", "token_budget": 50}
            )
            assert _code(ctx) == (404, "not_found")
        listed = {s["session_id"] for s in alice.get("/v1/sessions").json()["sessions"]}
        assert "b-garden" not in listed and "memory:bob" not in listed
        assert SECRET_B not in alice.get("/v1/notes").text
        assert SECRET_B not in alice.get("/v1/facts").text
        assert alice.get("/v1/notes/garden").json()["content"] == f"garden gate note {SECRET_A}"
        assert alice.get("/v1/facts/garden/gate").json()["value"] == SECRET_A
    with two_users.client(BOB) as bob:  # and nothing of Bob's changed
        events = bob.get("/v1/sessions/b-garden/events").json()["events"]
        assert [e["sequence"] for e in events] == [1, 2]
        assert bob.get("/v1/sessions/b-garden/scratchpad").json()["items"] == [
            f"check gate {SECRET_B}"
        ]


def test_sessions_without_a_user_are_invisible(
    server: LiveServer, engine: mindfile.Mindfile
) -> None:
    engine.store("library-made", 1, "written without a user: operator only")
    engine.write_scratchpad("library-pad", ["no user here"])
    with server.client(ALICE) as alice:
        for path in ("/v1/sessions/library-made/events", "/v1/sessions/library-pad/scratchpad"):
            assert _code(alice.get(path)) == (404, "not_found")
        adopt = alice.post("/v1/sessions/library-made/events", json={"sequence": 2, "payload": "x"})
        assert _code(adopt) == (404, "not_found")
        hits = alice.post("/v1/search", json={"query": "operator only"}).json()["hits"]
        assert all(h["session_id"] != "library-made" for h in hits)
    assert [r.sequence for r in engine.recall("library-made")] == [1]


def test_agents_of_a_token(server: LiveServer) -> None:
    with server.client(PLANNER) as planner, server.client(ALICE) as alice:
        stored = planner.post("/v1/sessions/plan-1/events", json={"sequence": 1, "payload": "go"})
        assert stored.status_code == 201
        info = {s["session_id"]: s for s in alice.get("/v1/sessions").json()["sessions"]}
        assert info["plan-1"]["agent_identity"] == "planner"  # the token's first agent
        assert info["plan-1"]["user_id"] == "alice"
        other = planner.post(
            "/v1/sessions/plan-2/events",
            json={"sequence": 1, "payload": "go", "agent_identity": "writer"},
        )
        assert _code(other) == (403, "forbidden")
        ctx = planner.post(
            "/v1/context",
            json={"session_id": "plan-1", "query": "x", "token_budget": 50, "agent_identity": "w"},
        )
        assert _code(ctx) == (403, "forbidden")
        free = alice.post(
            "/v1/sessions/plan-3/events",
            json={"sequence": 1, "payload": "go", "agent_identity": "writer"},
        )
        assert free.status_code == 201
