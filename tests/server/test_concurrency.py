"""Many clients at once: every request succeeds and nothing is lost or crossed."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ._support import ALICE, BOB, LiveServer

THREADS = 8
ROUNDS = 50


def _client_work(server: LiveServer, n: int) -> list[int]:
    token = ALICE if n % 2 == 0 else BOB
    statuses = []
    with server.client(token) as client:
        for i in range(1, ROUNDS + 1):
            stored = client.post(
                f"/v1/sessions/load-{n}/events",
                json={"sequence": i, "payload": f"client {n} message {i} about the harbour"},
            )
            found = client.post("/v1/search", json={"query": f"client {n} harbour", "top_k": 5})
            statuses += [stored.status_code, found.status_code]
            assert found.status_code == 200, found.text
            for hit in found.json()["hits"]:  # never another user's session
                assert int(hit["session_id"].split("-")[1]) % 2 == n % 2, hit
    return statuses


def test_concurrent_stores_and_searches(server: LiveServer) -> None:
    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(lambda n: _client_work(server, n), range(THREADS)))
    for statuses in results:
        assert statuses == [201, 200] * ROUNDS
    with server.client(ALICE) as alice, server.client(BOB) as bob:
        for n in range(THREADS):
            client = alice if n % 2 == 0 else bob
            events = client.get(f"/v1/sessions/load-{n}/events").json()["events"]
            assert [e["sequence"] for e in events] == list(range(1, ROUNDS + 1))
        metrics = alice.get("/metrics").text
    line = next(
        x for x in metrics.splitlines() if x.startswith("mindfile_search_duration_seconds_count")
    )
    assert float(line.rsplit(" ", 1)[1]) >= THREADS * ROUNDS
    assert "mindfile_http_requests_in_flight 1" in metrics  # only the scrape itself
