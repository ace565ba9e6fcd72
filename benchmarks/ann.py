"""The vector indexes side by side: exact, sqlite-vec, zvec, LanceDB (a script, not a test).

One store of ``--chunks`` chunks (LoCoMo sentences recombined, the bundled static model,
256 dimensions) is built once; each index then gets its own copy of the file and is
measured on it:

* **build**: sqlite-vec = filling its ``vec0`` table; exact / zvec / lancedb = building
  the on-disk base (``index.merge(full=True)``: exact publishes its vectors and codes,
  memory-mapped by every process).
* **search** p50/p95/p99, end to end through ``Mindfile.search`` (query embedding
  included): ``hybrid`` (the default mode), ``vector`` (vector leg only) and ``vector +
  session`` (the vector leg filtered to one session, p50).
* **recall@10**: the index's top 10 against the exact index's, vector-only, same queries.
* **cold**: a fresh process opens the copy and runs one vector search (median of
  ``--cold-repeats`` processes); its RSS and its *anonymous* memory after that search.
  Anonymous memory is what every further process adds; file-backed pages (the model,
  libraries, zvec's memory-mapped index) sit once in the page cache and are shared.
* **disk**: the store file plus the index folder (``<file>.index/``).

Examples::

    python benchmarks/ann.py                          # 100k chunks, every index
    python benchmarks/ann.py --chunks 1000000 --indexes exact,zvec,lancedb
    python benchmarks/ann.py --chunks 20000 --json > ann.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import LOCOMO, emit_json, log, machine_info, print_table
from latency import Corpus, EventStream, pct

import mindfile

REPO = Path(__file__).resolve().parents[1]
#: The shared data folder sits next to the repository (../shared from its root).
DEFAULT_LOCOMO = LOCOMO
INDEXES = ("exact", "sqlite-vec", "zvec", "lancedb")

_COLD = r"""
import json, sys, time
t0 = time.perf_counter()
import mindfile
path, index, query = sys.argv[1], sys.argv[2], sys.argv[3]
t1 = time.perf_counter()
mem = mindfile.open(path, vector_index=index)
t2 = time.perf_counter()
mem.search(query, mode="vector", top_k=10)
t3 = time.perf_counter()
mem.search(query + " again", mode="vector", top_k=10)
t4 = time.perf_counter()
mem_kb = {}
with open("/proc/self/smaps_rollup") as fh:
    for line in fh:
        parts = line.split()
        if parts and parts[0].rstrip(":") in ("Rss", "Private_Clean", "Private_Dirty", "Anonymous"):
            mem_kb[parts[0].rstrip(":")] = int(parts[1])
print(json.dumps({
    "import_ms": (t1 - t0) * 1e3, "open_ms": (t2 - t1) * 1e3,
    "first_search_ms": (t3 - t2) * 1e3, "second_search_ms": (t4 - t3) * 1e3,
    "rss_mb": mem_kb["Rss"] / 1024,
    "uss_mb": (mem_kb["Private_Clean"] + mem_kb["Private_Dirty"]) / 1024,
    "anon_mb": mem_kb["Anonymous"] / 1024,
}))
mem.close()
"""


def folder_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    if not path.exists():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def make_store(path: Path, chunks: int, corpus: Corpus) -> None:
    stream = EventStream(corpus)
    with mindfile.open(path, vector_index="exact") as mem:
        t0 = time.perf_counter()
        for start in range(0, chunks, 2000):
            mem.store_many(stream.events(min(2000, chunks - start)))
            if start and start % 20000 == 0:
                log(f"  ingested {start:,} messages")
        n = int(mem.db.scalar("SELECT count(*) FROM chunks_vec"))
        mem.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        log(f"store: {n:,} chunks in {time.perf_counter() - t0:.1f} s")


def latency(mem: mindfile.Mindfile, queries: Sequence[str], **kw: Any) -> dict[str, float]:
    samples = []
    for q in queries:
        t0 = time.perf_counter_ns()
        mem.search(q, top_k=10, **kw)
        samples.append(time.perf_counter_ns() - t0)
    return pct(samples)


def cold(path: Path, index: str, queries: Sequence[str], repeats: int) -> dict[str, float]:
    runs = []
    for i in range(repeats):
        proc = subprocess.run(
            [sys.executable, "-c", _COLD, str(path), index, queries[i]],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"cold process failed:\n{proc.stderr}")
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return {k: float(np.median([r[k] for r in runs])) for k in runs[0]}


def bench_index(
    name: str,
    source: Path,
    work: Path,
    queries: Sequence[str],
    qvecs: np.ndarray,
    truth: list[list[int]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    path = work / f"{name}.db"
    shutil.copyfile(source, path)
    log(f"{name}: building")
    with mindfile.open(path, vector_index=name) as mem:
        t0 = time.perf_counter()
        if hasattr(mem.index, "merge"):  # exact (on a file), zvec, lancedb: publish
            mem.index.merge(full=True)
        size = mem.index.size()
        build_s = time.perf_counter() - t0
        log(f"{name}: built {size:,} vectors in {build_s:.1f} s")
        warm = queries[: min(20, len(queries))]
        latency(mem, warm)
        latency(mem, warm, mode="vector")
        # Hybrid searches rank with FTS5 until the in-memory BM25 index is built (in a
        # background thread): time the steady state.
        while mem.lexical is not None and not mem.lexical.usable():
            time.sleep(0.2)
        latency(mem, warm)
        hybrid = latency(mem, queries)
        vector = latency(mem, queries, mode="vector")
        sessions = [f"bench-{i % 100:03d}" for i in range(len(queries))]
        filtered = []
        for q, s in zip(queries, sessions, strict=True):
            t0n = time.perf_counter_ns()
            mem.search(q, top_k=10, mode="vector", session_id=s)
            filtered.append(time.perf_counter_ns() - t0n)
        recall = []
        for qv, exact in zip(qvecs, truth, strict=True):
            got = [i for i, _ in mem.index.search(qv, 10)]
            recall.append(len(set(got) & set(exact)) / max(1, len(exact)))
    log(f"{name}: cold open")
    cold_stats = cold(path, name, queries[-args.cold_repeats :], args.cold_repeats)
    index_dir = path.with_name(path.name + ".index")
    return {
        "index": name,
        "vectors": size,
        "build_s": build_s,
        "hybrid_p50_ms": hybrid["p50_ms"],
        "hybrid_p95_ms": hybrid["p95_ms"],
        "hybrid_p99_ms": hybrid["p99_ms"],
        "vector_p50_ms": vector["p50_ms"],
        "vector_p95_ms": vector["p95_ms"],
        "vector_p99_ms": vector["p99_ms"],
        "vector_session_p50_ms": pct(filtered)["p50_ms"],
        "recall_at_10": float(np.mean(recall)),
        "cold_open_ms": cold_stats["open_ms"],
        "cold_first_search_ms": cold_stats["first_search_ms"],
        "cold_open_plus_first_ms": cold_stats["open_ms"] + cold_stats["first_search_ms"],
        "cold_second_search_ms": cold_stats["second_search_ms"],
        "rss_mb": cold_stats["rss_mb"],
        "uss_mb": cold_stats["uss_mb"],
        "anon_mb": cold_stats["anon_mb"],
        "disk_store_mb": folder_size(path) / 2**20,
        "disk_index_mb": folder_size(index_dir) / 2**20,
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--chunks", type=int, default=100_000, help="store size (default 100000)")
    p.add_argument("--indexes", default=",".join(INDEXES), help="comma-separated")
    p.add_argument("--queries", type=int, default=300, help="timed queries per mode")
    p.add_argument("--cold-repeats", type=int, default=3)
    p.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="LoCoMo JSON (read only)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--workdir", type=Path, default=None, help="keep the stores here")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names = [n.strip() for n in args.indexes.split(",") if n.strip()]
    corpus = Corpus(args.locomo, args.seed)
    log(f"corpus: {corpus.source} ({corpus.path})")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="mindfile-ann-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    source = work / "source.db"
    if not source.exists():
        make_store(source, args.chunks, corpus)
    queries = corpus.queries(args.queries)
    with mindfile.open(source, vector_index="exact") as mem:
        qvecs = np.stack([mem.embedder.embed_query(q) for q in queries])
        truth = [[i for i, _ in mem.index.search(qv, 10)] for qv in qvecs]
        chunks = int(mem.db.scalar("SELECT count(*) FROM chunks"))
    rows = [bench_index(n, source, work, queries, qvecs, truth, args) for n in names]
    report = {
        "benchmark": "ann",
        "chunks": chunks,
        "queries": len(queries),
        "corpus": corpus.source,
        "machine": machine_info(),
        "load_average_at_end": os.getloadavg()[0],
        "rows": rows,
    }
    if args.json:
        emit_json(report)
    else:
        search_cols = ["index", "build_s", "hybrid_p50_ms", "hybrid_p95_ms", "hybrid_p99_ms"]
        search_cols += ["vector_p50_ms", "vector_p95_ms", "vector_p99_ms"]
        search_cols += ["vector_session_p50_ms"]
        title = f"Search at {chunks:,} chunks ({len(queries)} queries, ms, top_k=10)"
        print_table(rows, search_cols, title)
        print(f"\nload average at the end: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
        other_cols = ["index", "recall_at_10", "cold_open_ms", "cold_first_search_ms"]
        other_cols += ["rss_mb", "anon_mb", "disk_store_mb", "disk_index_mb"]
        title = "Recall, cold open (fresh process), memory after one search, disk"
        print_table(rows, other_cols, title)
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
