"""What the HTTP API costs: search over HTTP vs in-process, on the same store (a script).

Builds an on-disk store of ~N chunks (realistic ~1,000-character chat messages from
``_common.chat_text``, two chunks each, the bundled static model by default), then:

1. in-process ``mem.search(q, top_k=10, user_id="default")`` latency, p50/p95/p99 (one
   thread): the very search the server runs for a request, since the server always
   scopes to the caller's user (a row without the user filter is shown for reference);
2. the same queries as ``POST /v1/search`` to ``mindfile serve`` running in its own
   process on the same file, over one keep-alive httpx client (bearer token on);
3. throughput with C concurrent clients (threads, each its own keep-alive client) over
   HTTP, and C threads calling ``search`` in-process, for comparison.

The server is a subprocess (``python -m mindfile serve``), so client and server do not
share a GIL; the client threads do share this process's. Queries are 3-6 random words of
the same vocabulary (never stored text).

Examples::

    python benchmarks/http_latency.py                    # 10k chunks, 500 queries, 4 clients
    python benchmarks/http_latency.py --quick
    python benchmarks/http_latency.py --chunks 100000 --json > http.json
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import WORDS, chat_text, emit_json, log, machine_info, percentiles_ms, print_table

import mindfile

TOKEN = "benchmark-token-0123456789abcdef"


def pct(samples_ns: Sequence[int]) -> dict[str, float | None]:
    """p50/p95/p99/mean/max in milliseconds of nanosecond samples."""
    return percentiles_ms(np.asarray(samples_ns, dtype=np.float64) / 1e6)


def build_store(path: Path, chunks: int, embedder: str | None, seed: int) -> dict[str, Any]:
    """At least ``chunks`` chunks of ~1,000-character messages (each makes 2-3 chunks),
    in 100 sessions, stored in batches of 200 messages."""
    rng = random.Random(seed)
    sessions = 100
    t0 = time.perf_counter()
    added = messages = 0
    with mindfile.open(path, embedder=embedder) as mem:
        while added < chunks:
            batch: list[tuple[str, int, Any]] = []
            for _ in range(200):
                sid, seq = f"s{messages % sessions}", messages // sessions + 1
                role = "user" if messages % 2 == 0 else "assistant"
                batch.append((sid, seq, {"role": role, "content": chat_text(rng)}))
                messages += 1
            added += mem.store_many(batch, user_id="default")
        info = mem.info()
    return {
        "messages": messages,
        "sessions": sessions,
        "chunks": info.chunks,
        "build_s": time.perf_counter() - t0,
        "embedding_model": info.embedding_model,
    }


def queries(n: int, seed: int) -> list[str]:
    rng = random.Random(seed + 1)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 6))) for _ in range(n)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(db: Path, port: int, embedder: str | None) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "mindfile", "serve", "--db", str(db), "--port", str(port)]
    cmd += ["--no-access-log", "--log-level", "warning"]
    if embedder:
        cmd += ["--embedder", embedder]
    env = {**os.environ, "MINDFILE_API_TOKEN": TOKEN}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise SystemExit(f"the server exited: {err}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the server did not start within 60 s")


def server_means(client: Any) -> dict[str, float]:
    """Running sums and counts from the server's /metrics: the engine's time per search
    and the server's time per ``POST /v1/search`` request."""
    sums: dict[str, float] = {}
    for line in client.get("/metrics").text.splitlines():
        for key, prefix in (
            ("engine_sum", "mindfile_search_duration_seconds_sum{"),
            ("engine_count", "mindfile_search_duration_seconds_count{"),
            (
                "server_sum",
                'mindfile_http_request_duration_seconds_sum{method="POST",route="/v1/search"}',
            ),
            (
                "server_count",
                'mindfile_http_request_duration_seconds_count{method="POST",route="/v1/search"}',
            ),
        ):
            if line.startswith(prefix):
                sums[key] = sums.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return sums


def warm(call: Callable[[str], Any], qs: Sequence[str], seconds: float) -> None:
    """Search for ``seconds`` (at least 50 queries): the in-memory BM25 index builds in
    the background after open; until it is ready searches rank with FTS5 (slower)."""
    deadline = time.monotonic() + seconds
    i = 0
    while i < 50 or time.monotonic() < deadline:
        call(qs[i % len(qs)])
        i += 1


def run_latency(call: Callable[[str], Any], qs: Sequence[str]) -> list[int]:
    samples = []
    for q in qs:
        t0 = time.perf_counter_ns()
        call(q)
        samples.append(time.perf_counter_ns() - t0)
    return samples


def run_concurrent(
    make_call: Callable[[], tuple[Callable[[str], Any], Callable[[], None]]],
    qs: Sequence[str],
    clients: int,
    per_client: int,
) -> dict[str, float]:
    """``clients`` threads, each ``per_client`` calls; requests/s and latency."""
    barrier = threading.Barrier(clients + 1)
    samples: list[list[int]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        call, close = make_call()
        try:
            call(qs[k])  # warm the connection
            barrier.wait()
            for i in range(per_client):
                q = qs[(k * per_client + i) % len(qs)]
                t0 = time.perf_counter_ns()
                call(q)
                samples[k].append(time.perf_counter_ns() - t0)
        except BaseException as exc:  # reported below
            errors.append(exc)
            barrier.abort()
        finally:
            close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    flat = [s for per in samples for s in per]
    return {"requests": len(flat), "wall_s": wall, "rps": len(flat) / wall, **pct(flat)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--per-client", type=int, default=250)
    parser.add_argument("--embedder", default=None, help="default: the bundled static model")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--warmup", type=float, default=3.0, help="seconds of searches before measuring"
    )
    parser.add_argument("--quick", action="store_true", help="2k chunks, 100 queries")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.chunks, args.queries, args.per_client = 2_000, 100, 50

    import httpx

    result: dict[str, Any] = {"machine": machine_info(), "load_avg_1m": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "http-bench.db"
        log(f"building a store of ~{args.chunks} chunks")
        result["store"] = build_store(db, args.chunks, args.embedder, args.seed)
        log(f"store: {result['store']}")
        qs = queries(args.queries, args.seed)
        port = free_port()
        server = start_server(db, port, args.embedder)
        rows: list[dict[str, Any]] = []
        try:
            with mindfile.open(db) as mem:

                def local(q: str) -> Any:  # exactly what the server runs for a request
                    return mem.search(q, top_k=10, user_id="default")

                def unscoped(q: str) -> Any:
                    return mem.search(q, top_k=10)

                log("in-process search")
                warm(local, qs, args.warmup)
                while mem.lexical is not None and mem.info().extra["lexical_index"] != "ready":
                    time.sleep(0.1)
                rows.append({"path": "in-process", **pct(run_latency(local, qs))})
                extra = {"path": "in-process, no user filter", **pct(run_latency(unscoped, qs))}

                headers = {"Authorization": f"Bearer {TOKEN}"}
                base = f"http://127.0.0.1:{port}"
                with httpx.Client(base_url=base, headers=headers, timeout=30) as client:

                    def remote(q: str) -> Any:
                        response = client.post("/v1/search", json={"query": q, "top_k": 10})
                        response.raise_for_status()
                        return response.json()

                    log("HTTP search (keep-alive)")
                    warm(remote, qs, args.warmup)
                    before = server_means(client)
                    rows.append({"path": "HTTP", **pct(run_latency(remote, qs))})
                    after = server_means(client)
                    n = after["engine_count"] - before["engine_count"]
                    result["server_side_mean_ms"] = {
                        "engine_search": (after["engine_sum"] - before["engine_sum"]) / n * 1e3,
                        "server_request": (after["server_sum"] - before["server_sum"]) / n * 1e3,
                    }
                    a, b = local(qs[0]), remote(qs[0])
                    same = [h.chunk_id for h in a] == [h["chunk_id"] for h in b["hits"]]
                    result["same_results"] = same

                def local_call() -> tuple[Callable[[str], Any], Callable[[], None]]:
                    return local, lambda: None

                def http_call() -> tuple[Callable[[str], Any], Callable[[], None]]:
                    c = httpx.Client(base_url=base, headers=headers, timeout=30)

                    def call(q: str) -> Any:
                        r = c.post("/v1/search", json={"query": q, "top_k": 10})
                        r.raise_for_status()
                        return r

                    return call, c.close

                log(f"{args.clients} concurrent callers")
                conc = [
                    {
                        "path": f"in-process, {args.clients} threads",
                        **run_concurrent(local_call, qs, args.clients, args.per_client),
                    },
                    {
                        "path": f"HTTP, {args.clients} clients",
                        **run_concurrent(http_call, qs, args.clients, args.per_client),
                    },
                ]
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
    overhead = rows[1]["p50_ms"] - rows[0]["p50_ms"]
    rows.append(extra)
    result.update(
        latency=rows,
        concurrent=conc,
        http_overhead_p50_ms=overhead,
        settings={k: v for k, v in vars(args).items() if k != "json"},
    )
    if args.json:
        emit_json(result)
        return 0
    cols = ["path", "p50_ms", "p95_ms", "p99_ms", "mean_ms"]
    title = f"search top_k=10, {result['store']['chunks']} chunks, {len(qs)} queries"
    print_table(rows, cols, title)
    print(f"HTTP overhead at p50: {overhead:.2f} ms; same hits: {result['same_results']}")
    side = result["server_side_mean_ms"]
    print(
        f"inside the server, per HTTP search (means): engine {side['engine_search']:.2f} ms, "
        f"whole request {side['server_request']:.2f} ms; the rest is the client and the socket"
    )
    print_table(
        conc,
        ["path", "requests", "wall_s", "rps", "p50_ms", "p99_ms"],
        f"throughput, {args.per_client} searches per caller",
    )
    print(f"load average (1 min) at start: {result['load_avg_1m']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
