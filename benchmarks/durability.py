"""What ``durability="full"`` costs: single ``store`` and ``store_many`` latency, both modes.

    python benchmarks/durability.py [--stores 500] [--quick] [--json]

WAL with ``synchronous=NORMAL`` (the default) fsyncs only at checkpoints; ``FULL``
fsyncs the WAL on every commit, so every acknowledged write survives a power loss.
The cost is one fsync per transaction, which depends on the disk: measure yours.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit_json, machine_info, print_table

import mindfile

TEXT = (
    "We talked about the quarterly review and the battery degradation study; the "
    "slides need two more charts and a summary of the thermal tests from March."
)


def measure(path: Path, durability: str, stores: int, batches: int) -> dict[str, Any]:
    with mindfile.open(path, embedder="hash", durability=durability) as mem:  # type: ignore[arg-type]
        single: list[float] = []
        for i in range(1, stores + 1):
            t = time.perf_counter()
            mem.store("s", i, f"{TEXT} ({i})")
            single.append((time.perf_counter() - t) * 1000)
        many: list[float] = []
        seq = stores
        for _ in range(batches):
            events = [("m", seq + j, f"{TEXT} [{seq + j}]") for j in range(1, 101)]
            seq += 100
            t = time.perf_counter()
            mem.store_many(events)
            many.append((time.perf_counter() - t) * 1000)
    single.sort()
    return {
        "durability": durability,
        "store_p50_ms": statistics.median(single),
        "store_p99_ms": single[int(0.99 * (len(single) - 1))],
        "store_many_100_p50_ms": statistics.median(many),
        "stores_per_s": 1000 / statistics.mean(single),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=int, default=500)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="100 stores, 5 batches")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    stores, batches = (100, 5) if args.quick else (args.stores, args.batches)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mindfile-durability-") as tmp:
        for mode in ("normal", "full"):
            rows.append(measure(Path(tmp) / f"{mode}.db", mode, stores, batches))
    if args.json:
        emit_json({"benchmark": "mindfile-durability", "machine": machine_info(), "rows": rows})
    else:
        cols = ["durability", "store_p50_ms", "store_p99_ms", "store_many_100_p50_ms"]
        print_table(rows, [*cols, "stores_per_s"], "store latency by durability (hash embedder)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
