"""What "deleted means gone" costs: ``purge()`` (FTS5 optimize + WAL truncate) by store size.

    python benchmarks/purge.py [--sizes 10000,50000] [--quick] [--json]

A store of realistic chat (~1,000-character messages, about two chunks each) is built
with the hash embedder (embedding is not what is measured); then one session is
forgotten and the purge that ``close()`` would run is timed, three times per size
(each time after a fresh delete). Also shown: ``forget`` itself, and a ``close()``
with nothing to purge (the flag check only).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import chat_text, emit_json, machine_info, print_table

import mindfile


def build(path: Path, chunks: int, rng: random.Random) -> int:
    made = 0
    session = 0
    with mindfile.open(path, embedder="hash") as mem:
        while made < chunks:
            events = [(f"s{session}", i, chat_text(rng)) for i in range(1, 101)]
            made += mem.store_many(events, user_id=f"u{session % 50}")
            session += 1
        mem.purge()
    return session


def measure(size: int, rng: random.Random) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mindfile-purge-") as tmp:
        path = Path(tmp) / "store.db"
        sessions = build(path, size, rng)
        purges, forgets = [], []
        for k in range(3):
            with mindfile.open(path) as mem:
                t = time.perf_counter()
                mem.forget(f"s{k}")
                forgets.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                mem.purge()
                purges.append((time.perf_counter() - t) * 1000)
        with mindfile.open(path) as mem:
            t = time.perf_counter()
            mem.close()
            idle_close = (time.perf_counter() - t) * 1000
        return {
            "chunks": size,
            "sessions": sessions,
            "db_mb": path.stat().st_size / 1e6,
            "forget_p50_ms": statistics.median(forgets),
            "purge_p50_ms": statistics.median(purges),
            "purge_max_ms": max(purges),
            "idle_close_ms": idle_close,
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,50000,100000")
    parser.add_argument("--quick", action="store_true", help="2,000 chunks only")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [2000] if args.quick else [int(s) for s in args.sizes.split(",")]
    rng = random.Random(7)
    rows = [measure(n, rng) for n in sizes]
    if args.json:
        emit_json({"benchmark": "mindfile-purge", "machine": machine_info(), "rows": rows})
    else:
        cols = ["chunks", "sessions", "db_mb", "forget_p50_ms", "purge_p50_ms", "purge_max_ms"]
        print_table(rows, [*cols, "idle_close_ms"], "purge cost by store size (1 kB messages)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
