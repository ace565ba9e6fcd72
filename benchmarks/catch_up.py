"""How long a process's other threads wait while its vector index reads a backlog.

    python benchmarks/catch_up.py [--base 20000] [--backlog 20000] [--index exact]
                                  [--pages 256,1024,4096,all] [--repeats 3] [--json]

A process opening a store whose published vector generation lags behind the chunks
(a publisher's merge still running, or publishing turned off) reads the missing rows
from SQLite at its first search. This builds a store of ``--base`` events of
assistant-chat length (~2.4 chunks each) with a published generation, adds
``--backlog`` events the generation does not hold, then opens it afresh once per page
size and repeat (alternating the order) and, while the first vector search catches up,
times a ``recall`` every 2 ms from another thread. ``all`` reads the backlog in one
piece (what the index did before it paged). Reported: the first search, the other
thread's calls during it (p50, p99, max) and how many it made.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import chat_text, emit_json, log, machine_info, percentiles_ms, print_table

os.environ["MINDFILE_PUBLISHER"] = "0"  # the backlog stays unpublished

import mindfile
from mindfile.vector import ann as ann_module
from mindfile.vector.ann import MANIFEST, AnnIndex, Manifest

ALL = 10**12


def build(path: Path, base: int, backlog: int, index: str, embedder: str) -> int:
    rng = random.Random(7)
    AnnIndex.min_delta = 10**12  # nothing merges but the explicit publish below
    with mindfile.open(path, embedder=embedder, vector_index=index) as mem:
        for start in range(0, base + backlog, 500):
            if start == base:
                mem.index.merge(full=True)
            ks = range(start, min(start + 500, base + backlog))
            mem.store_many([(f"s{k % 50}", k, chat_text(rng)) for k in ks])
        chunks = int(mem.db.scalar("SELECT count(*) FROM chunks"))
        assert isinstance(mem.index, AnnIndex)
        manifest = Manifest.load(mem.index.folder / MANIFEST)
    published = manifest.count if manifest is not None else 0
    log(f"built {chunks:,} chunks, {published:,} published")
    return chunks - published


def measure(path: Path, index: str, page: int) -> dict[str, Any]:
    ann_module.CATCH_UP_PAGE = page
    with mindfile.open(path, vector_index=index) as mem:
        query = mem.embedder.embed_query("what did we decide about the quarterly budget")
        stop = threading.Event()
        calls: list[tuple[float, float]] = []

        def probe() -> None:
            while not stop.is_set():
                t = time.perf_counter()
                mem.recall("s1", 1)
                calls.append((t, time.perf_counter() - t))
                time.sleep(0.002)

        prober = threading.Thread(target=probe)
        prober.start()
        time.sleep(0.05)
        start = time.perf_counter()
        mem.index.search(query, 10)
        end = time.perf_counter()
        stop.set()
        prober.join()
    during = percentiles_ms([d * 1000 for t, d in calls if t + d > start and t < end])
    return {
        "first_search_ms": (end - start) * 1000,
        "calls": sum(1 for t, d in calls if t + d > start and t < end),
        "p50": during["p50_ms"],
        "p99": during["p99_ms"],
        "max": during["max_ms"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=int, default=20_000, help="events published")
    parser.add_argument("--backlog", type=int, default=20_000, help="events not published")
    parser.add_argument("--index", default="exact", help="exact, zvec or lancedb")
    parser.add_argument("--embedder", default="static")
    parser.add_argument("--pages", default="256,1024,4096,all")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--store", type=Path, help="reuse (or make) this store file")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    pages = [ALL if p == "all" else int(p) for p in args.pages.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        path = args.store or Path(tmp) / "catch_up.db"
        if not path.exists():
            build(path, args.base, args.backlog, args.index, args.embedder)
        AnnIndex.min_delta = 10**12  # the fresh processes read, never merge
        results: dict[int, list[dict[str, Any]]] = {p: [] for p in pages}
        for rep in range(args.repeats):
            order = pages if rep % 2 == 0 else pages[::-1]
            for page in order:
                results[page].append(measure(path, args.index, page))
                log(f"page {page}: {results[page][-1]}")
    rows = []
    for page in pages:
        runs = results[page]
        row: dict[str, Any] = {"page": "all" if page == ALL else page}
        for key in ("first_search_ms", "calls", "p50", "p99", "max"):
            values = [r[key] for r in runs if r[key] is not None]
            row[key] = statistics.median(values) if values else None
        rows.append(row)
    if args.json:
        emit_json({"machine": machine_info(), "args": vars(args), "rows": rows, "runs": results})
    else:
        print_table(
            rows,
            ["page", "first_search_ms", "calls", "p50", "p99", "max"],
            f"Catch-up of a backlog ({args.index}): the first vector search, and another "
            f"thread's recall() while it runs (ms, medians of {args.repeats})",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
