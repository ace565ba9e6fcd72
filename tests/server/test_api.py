"""Round trips through a real server: events, search, context, notes, facts,
scratchpad, summary; error mapping; OpenAPI; metrics."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

import mindfile
from mindfile.memory import SummaryState

from ._support import ALICE, LiveServer


@pytest.fixture
def alice(server: LiveServer) -> httpx.Client:
    with server.client(ALICE) as client:
        yield client


def _error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    return str(body["error"]["message"])


def test_events_round_trip(alice: httpx.Client) -> None:
    one = alice.post(
        "/v1/sessions/rt-1/events",
        json={"sequence": 1, "payload": {"role": "user", "content": "I moved to Lisbon in May."}},
    )
    assert one.status_code == 201, one.text
    assert one.json() == {"session_id": "rt-1", "stored": 1, "chunks_added": 1}
    many = alice.post(
        "/v1/sessions/rt-1/events",
        json={
            "events": [
                {"sequence": 2, "payload": "Nice, how is the weather?", "tags": ["weather"]},
                {"sequence": 3, "payload": "Sunny.", "metadata": {"mood": "good"}},
            ],
            "channel": "web",
        },
    )
    assert many.status_code == 201, many.text
    assert many.json()["stored"] == 2
    events = alice.get("/v1/sessions/rt-1/events").json()["events"]
    assert [e["sequence"] for e in events] == [1, 2, 3]
    assert events[0]["payload"]["content"] == "I moved to Lisbon in May."
    last = alice.get("/v1/sessions/rt-1/events", params={"limit": 1}).json()["events"]
    assert [e["sequence"] for e in last] == [3]
    sessions = alice.get("/v1/sessions").json()["sessions"]
    mine = {s["session_id"]: s for s in sessions}
    assert mine["rt-1"]["user_id"] == "alice" and mine["rt-1"]["channel"] == "web"
    assert mine["rt-1"]["event_count"] == 3
    assert alice.get("/v1/sessions", params={"channel": "nope"}).json() == {"sessions": []}


def test_search_and_context(alice: httpx.Client) -> None:
    alice.post(
        "/v1/sessions/rt-2/events",
        json={"sequence": 1, "payload": {"role": "user", "content": "I am allergic to peanuts."}},
    ).raise_for_status()
    hits = alice.post("/v1/search", json={"query": "peanuts allergy", "top_k": 3}).json()
    assert hits["mode"] == "hybrid" and hits["degraded"] is None
    assert hits["hits"][0]["text"] == "I am allergic to peanuts."
    assert set(hits["hits"][0]["breakdown"]) >= {"vector", "fts", "fused"}
    only = alice.post(
        "/v1/search",
        json={
            "query": "peanuts",
            "session_id": ["rt-2"],
            "mode": "fts",
            "fusion": "rrf",
            "weights": {"vector": 0.5},
            "min_score": 0.0,
            "candidates": 20,
        },
    ).json()
    assert only["mode"] == "fts" and {h["session_id"] for h in only["hits"]} == {"rt-2"}
    assert only["weights"] == [0.5, 0.5]
    tagged = alice.post("/v1/search", json={"query": "weather", "tags": ["weather"]}).json()
    assert [h["sequence_start"] for h in tagged["hits"]] == [2]

    ctx = alice.post(
        "/v1/context",
        json={
            "session_id": "rt-2",
            "query": "what should I not eat?",
            "token_budget": 400,
            "system_prompt": "You are helpful.",
            "config": {"recent_turns": 4, "weights": {"similarity": 0.5}},
        },
    )
    assert ctx.status_code == 200, ctx.text
    body = ctx.json()
    assert body["tokens"] <= 400 and body["messages"][0]["role"] == "system"
    assert any("peanuts" in str(m["content"]) for m in body["messages"])
    assert {i["source"] for i in body["items"]} <= {"summary", "memory", "recent", "salient"}
    bad = alice.post(
        "/v1/context",
        json={"session_id": "rt-2", "query": "x", "token_budget": 100, "config": {"lexical_k": -1}},
    )
    assert "lexical_k" in _error(bad, 400, "invalid_input")


def test_notes_round_trip(alice: httpx.Client) -> None:
    put = alice.put("/v1/notes/n-1", json={"content": "Alice drinks green tea.", "tags": ["food"]})
    assert put.status_code == 200, put.text
    assert put.json()["session_id"] == "memory:alice"
    alice.put("/v1/notes/n-2", json={"content": "Alice runs on Sundays."}).raise_for_status()
    assert alice.get("/v1/notes/n-1").json()["content"] == "Alice drinks green tea."
    listed = alice.get("/v1/notes", params={"tags": ["food"]}).json()["notes"]
    assert [n["note_id"] for n in listed] == ["n-1"]
    assert len(alice.get("/v1/notes").json()["notes"]) == 2
    found = alice.post("/v1/notes/search", json={"query": "green tea", "top_k": 1}).json()
    assert found["results"][0]["note_id"] == "n-1"
    replaced = alice.put("/v1/notes/n-1", json={"content": "Alice drinks black tea."}).json()
    assert replaced["created_at"] == put.json()["created_at"]
    assert alice.delete("/v1/notes/n-2").json() == {"note_id": "n-2", "deleted": True}
    _error(alice.get("/v1/notes/n-2"), 404, "not_found")
    _error(alice.delete("/v1/notes/n-2"), 404, "not_found")


def test_facts_round_trip(alice: httpx.Client) -> None:
    first = alice.put("/v1/facts/home/city", json={"value": "Lisbon", "source": "user"})
    assert first.status_code == 200, first.text
    assert first.json()["scope"] == "alice"
    alice.put("/v1/facts/home/city", json={"value": "Porto"}).raise_for_status()
    got = alice.get("/v1/facts/home/city", params={"history": "true"}).json()
    assert got["value"] == "Porto" and [h["value"] for h in got["history"]] == ["Lisbon"]
    alice.put("/v1/facts/work/role", json={"value": "engineer"}).raise_for_status()
    assert [f["key"] for f in alice.get("/v1/facts").json()["facts"]] == ["city", "role"]
    assert [
        f["key"] for f in alice.get("/v1/facts", params={"category": "work"}).json()["facts"]
    ] == ["role"]
    hits = alice.post("/v1/notes/search", json={"query": "Porto city"}).json()["results"]
    assert any(h["kind"] == "fact" and h["key"] == "city" for h in hits)
    assert alice.delete("/v1/facts/work/role").json()["deleted"] is True
    _error(alice.get("/v1/facts/work/role"), 404, "not_found")
    _error(alice.delete("/v1/facts/work/role"), 404, "not_found")


def test_scratchpad_and_summary(alice: httpx.Client, engine: mindfile.Mindfile) -> None:
    # A scratchpad before the first message creates the session, for alice.
    put = alice.put("/v1/sessions/pad-1/scratchpad", json={"items": ["goal: plan a trip"]})
    assert put.status_code == 200, put.text
    assert alice.get("/v1/sessions/pad-1/scratchpad").json()["items"] == ["goal: plan a trip"]
    owners = {s.session_id: s.user_id for s in engine.list_sessions()}
    assert owners["pad-1"] == "alice"
    too_many = alice.put("/v1/sessions/pad-1/scratchpad", json={"items": ["x"] * 33})
    _error(too_many, 413, "limit_exceeded")
    assert alice.delete("/v1/sessions/pad-1/scratchpad").json()["deleted"] is True
    _error(alice.get("/v1/sessions/pad-1/scratchpad"), 404, "not_found")
    _error(alice.delete("/v1/sessions/pad-1/scratchpad"), 404, "not_found")

    _error(alice.get("/v1/sessions/pad-1/summary"), 404, "not_found")
    engine.write_summary_state("pad-1", SummaryState("They plan a trip.", 0), 0)
    summary = alice.get("/v1/sessions/pad-1/summary").json()
    assert summary["summary"] == "They plan a trip." and summary["epoch"] == 1


def test_forget_session(alice: httpx.Client) -> None:
    alice.post(
        "/v1/sessions/gone/events", json={"sequence": 1, "payload": "bye"}
    ).raise_for_status()
    assert alice.delete("/v1/sessions/gone").json() == {"session_id": "gone", "deleted": True}
    _error(alice.get("/v1/sessions/gone/events"), 404, "not_found")
    _error(alice.delete("/v1/sessions/gone"), 404, "not_found")


def test_error_mapping(alice: httpx.Client) -> None:
    # 400 invalid_input: the engine's checks and the request models'.
    _error(alice.post("/v1/search", json={"query": "x", "top_k": 0}), 400, "invalid_input")
    assert "top_k" in _error(
        alice.post("/v1/search", json={"query": "x", "top_k": "5"}), 400, "invalid_input"
    )
    assert "bogus" in _error(
        alice.post("/v1/search", json={"query": "x", "bogus": 1}), 400, "invalid_input"
    )
    assert "JSON" in _error(
        alice.post("/v1/search", content=b"{nope", headers={"content-type": "application/json"}),
        400,
        "invalid_input",
    )
    assert "Content-Type" in _error(
        alice.post("/v1/search", content=b"query=x", headers={"content-type": "text/plain"}),
        400,
        "invalid_input",
    )
    _error(alice.post("/v1/sessions/e/events", json={"events": []}), 400, "invalid_input")
    _error(alice.post("/v1/sessions/e/events", json={"sequence": 1}), 400, "invalid_input")
    _error(alice.put("/v1/notes/n", json={"content": ""}), 400, "invalid_input")
    _error(alice.get("/v1/sessions/x/events", params={"limit": "many"}), 400, "invalid_input")
    # 404: missing things and unknown routes; 405.
    _error(alice.get("/v1/sessions/never/events"), 404, "not_found")
    _error(alice.get("/v1/nowhere"), 404, "not_found")
    _error(alice.patch("/v1/search"), 405, "method_not_allowed")
    # 409: a sequence that does not grow; nothing written.
    alice.post("/v1/sessions/seq/events", json={"sequence": 5, "payload": "a"}).raise_for_status()
    _error(
        alice.post("/v1/sessions/seq/events", json={"sequence": 5, "payload": "b"}), 409, "conflict"
    )
    batch = {"events": [{"sequence": 6, "payload": "c"}, {"sequence": 6, "payload": "d"}]}
    _error(alice.post("/v1/sessions/seq/events", json=batch), 409, "conflict")
    assert [e["sequence"] for e in alice.get("/v1/sessions/seq/events").json()["events"]] == [5]
    # A channel conflict on one's own session stays a 409.
    alice.post(
        "/v1/sessions/chan/events", json={"sequence": 1, "payload": "a", "channel": "web"}
    ).raise_for_status()
    chan = alice.post(
        "/v1/sessions/chan/events", json={"sequence": 2, "payload": "b", "channel": "sms"}
    )
    _error(chan, 409, "scope_conflict")


def test_unexpected_failure_is_a_bare_500(
    alice: httpx.Client, engine: mindfile.Mindfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(engine, "list_sessions", boom)
    response = alice.get("/v1/sessions")
    message = _error(response, 500, "internal")
    assert "secret" not in response.text and "Traceback" not in response.text
    assert "log" in message


def test_body_limit(server: LiveServer, alice: httpx.Client) -> None:
    limit = server.settings.max_body_bytes
    assert limit == 16 * 1024 * 1024
    big = b'{"query": "' + b"a" * limit + b'"}'
    _error(
        alice.post("/v1/search", content=big, headers={"content-type": "application/json"}),
        413,
        "limit_exceeded",
    )

    def chunks() -> object:  # no Content-Length: counted as it streams
        for _ in range(17):
            yield b" " * (1024 * 1024)

    streamed = alice.post(
        "/v1/search", content=chunks(), headers={"content-type": "application/json"}
    )
    _error(streamed, 413, "limit_exceeded")
    assert alice.get("/healthz").status_code == 200


def test_openapi_lists_the_routes(server: LiveServer) -> None:
    doc = httpx.get(server.url + "/openapi.json").json()
    assert doc["info"]["title"] == "Mindfile" and doc["info"]["version"] == mindfile.__version__
    expected = {
        "/v1/sessions/{session_id}/events": {"get", "post"},
        "/v1/sessions/{session_id}": {"delete"},
        "/v1/sessions": {"get"},
        "/v1/search": {"post"},
        "/v1/context": {"post"},
        "/v1/notes/{note_id}": {"get", "put", "delete"},
        "/v1/notes": {"get"},
        "/v1/notes/search": {"post"},
        "/v1/facts/{category}/{key}": {"get", "put", "delete"},
        "/v1/facts": {"get"},
        "/v1/sessions/{session_id}/scratchpad": {"get", "put", "delete"},
        "/v1/sessions/{session_id}/summary": {"get"},
        "/healthz": {"get"},
        "/metrics": {"get"},
    }
    for path, methods in expected.items():
        assert set(doc["paths"][path]) == methods, path
    text = str(doc)
    assert "422" not in doc["paths"]["/v1/search"]["post"]["responses"]
    assert "HTTPValidationError" not in text  # validation errors are 400s, documented so
    assert doc["paths"]["/v1/search"]["post"]["responses"]["400"]["content"]
    assert "ErrorBody" in doc["components"]["schemas"]
    search = doc["components"]["schemas"]["SearchIn"]["properties"]
    assert {"query", "session_id", "tags", "top_k", "mode", "fusion", "weights"} <= set(search)
    assert {"min_score", "candidates", "channel"} <= set(search)


def test_metrics(server: LiveServer, alice: httpx.Client) -> None:
    alice.post("/v1/search", json={"query": "anything"}).raise_for_status()
    _error(httpx.get(server.url + "/metrics"), 401, "unauthorized")
    response = alice.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    for name in (
        "mindfile_http_requests_total",
        "mindfile_http_request_duration_seconds_bucket",
        "mindfile_http_requests_in_flight",
        "mindfile_search_duration_seconds_count",
        "mindfile_search_degraded_total",
        'mindfile_jobs{status="pending"}',
        "mindfile_jobs_lag_seconds",
        "mindfile_build_info",
    ):
        assert name in text, name
    assert 'route="/v1/search",status="200"' in text
    assert "tok-" not in text  # no token, ever
    for line in text.splitlines():  # every sample line is "name{labels} number"
        if line and not line.startswith("#"):
            float(line.rsplit(" ", 1)[1].replace("+Inf", "inf"))


def test_healthz(server: LiveServer) -> None:
    response = httpx.get(server.url + "/healthz")
    assert response.json() == {"status": "ok", "version": mindfile.__version__}


def test_files_search(alice: httpx.Client, engine: mindfile.Mindfile, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "deploy.md").write_text("# Deploy\n\nRun make release to ship the app.\n")
    (folder / "notes.txt").write_text("release notes live in the wiki\n")
    engine.sync([folder])
    found = alice.post("/v1/files/search", json={"query": "make release", "top_k": 3}).json()
    assert found["results"][0]["path"] == "deploy.md"
    assert found["results"][0]["start_line"] == 1
    only_txt = alice.post("/v1/files/search", json={"query": "release", "path": "*.txt"}).json()
    assert [r["path"] for r in only_txt["results"]] == ["notes.txt"]
    bad = alice.post("/v1/files/search", json={"query": 5})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_input"
