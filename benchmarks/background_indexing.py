"""Background-indexing benchmark for Mindfile (a script, not a test).

Measures, on an on-disk store in a temporary directory:

1. the cost the job backlog check adds to every hybrid/vector search
   (``mindfile.retrieve.degraded.backlog_note``: one indexed ``EXISTS``) with an empty
   queue, with many finished (``done``) jobs, and with a backlog;
2. ``store`` latency with ``indexing="sync"`` vs ``"background"`` (the write path
   without the embedder);
3. ``run_jobs`` throughput (chunks embedded and indexed per second).

Examples::

    python benchmarks/background_indexing.py --quick
    python benchmarks/background_indexing.py --embedder static --events 20000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import print_table

import mindfile
from mindfile.retrieve.degraded import backlog_note


def _per_call_us(fn: Callable[[], Any], repeat: int) -> float:
    """Median of 5 runs of ``repeat`` calls, in microseconds per call."""
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        runs.append((time.perf_counter() - start) / repeat * 1e6)
    return statistics.median(runs)


def _events(n: int, session: str = "s") -> list[tuple[str, int, str]]:
    return [(session, i, f"message {i} about topic{i % 97} and item{i % 13}") for i in range(n)]


def bench_check(tmp: Path, events: int, embedder: str) -> list[dict[str, Any]]:
    rows = []
    with mindfile.open(tmp / "check.db", embedder=embedder, indexing="background") as mem:
        rows.append({"queue": "empty", "us": _per_call_us(lambda: backlog_note(mem.db), 20_000)})
        mem.store_many(_events(events))
        rows.append(
            {
                "queue": f"{events} pending",
                "us": _per_call_us(lambda: backlog_note(mem.db), 2_000),
            }
        )
        mem.run_jobs(batch_size=256)
        rows.append(
            {
                "queue": f"{events} done",
                "us": _per_call_us(lambda: backlog_note(mem.db), 20_000),
            }
        )
    return rows


def bench_store(tmp: Path, events: int, embedder: str) -> list[dict[str, Any]]:
    rows = []
    for indexing in ("sync", "background"):
        path = tmp / f"store-{indexing}.db"
        with mindfile.open(path, embedder=embedder, indexing=indexing) as mem:  # type: ignore[arg-type]
            mem.store_many(_events(200, "warm"))
            samples = []
            for i in range(events):
                start = time.perf_counter()
                mem.store("s", i, f"message {i} about topic{i % 97} and item{i % 13}")
                samples.append((time.perf_counter() - start) * 1e3)
            samples.sort()
            row: dict[str, Any] = {
                "indexing": indexing,
                "p50_ms": samples[len(samples) // 2],
                "p95_ms": samples[int(len(samples) * 0.95)],
            }
            if indexing == "background":
                start = time.perf_counter()
                report = mem.run_jobs(batch_size=64)
                elapsed = time.perf_counter() - start
                row["drain_chunks_per_s"] = report.succeeded / elapsed if elapsed else None
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000, help="Events for the check.")
    parser.add_argument("--stores", type=int, default=500, help="Single stores timed.")
    parser.add_argument("--embedder", default="hash", help="Embedder spec (hash, static...).")
    parser.add_argument("--quick", action="store_true", help="Small sizes.")
    args = parser.parse_args()
    events, stores = (1_000, 100) if args.quick else (args.events, args.stores)
    with tempfile.TemporaryDirectory() as tmp:
        print_table(
            bench_check(Path(tmp), events, args.embedder),
            ["queue", "us"],
            "backlog check per search (microseconds)",
        )
        print_table(
            bench_store(Path(tmp), stores, args.embedder),
            ["indexing", "p50_ms", "p95_ms", "drain_chunks_per_s"],
            f"store latency, {args.embedder} embedder",
        )


if __name__ == "__main__":
    main()
