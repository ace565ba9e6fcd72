"""How long each writer holds SQLite's write lock, next to how long the call takes.

    python benchmarks/write_lock.py [--ops 300] [--embedder static] [--quick] [--json]

Every write prepares (extracts, chunks, hashes, embeds) outside any transaction and
then writes in one short ``BEGIN IMMEDIATE ... COMMIT`` (docs/architecture.md). This
times the outermost write transactions of each operation kind (the lock is held from
``BEGIN IMMEDIATE`` to ``COMMIT``) and the whole call, on ~1,000-character messages,
with the bundled embedder by default, so the gap between the two columns is the work
done without blocking other writers.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _common import chat_text, emit_json, machine_info, print_table

import mindfile
from mindfile.storage.db import Database

held: list[float] = []


def install_timer() -> None:
    """Record the duration of every outermost write transaction in ``held``."""
    original = Database.atomic.__wrapped__  # type: ignore[attr-defined]

    @contextlib.contextmanager
    def timed(self: Database) -> Iterator[Database]:
        outer = self._depth == 0
        start = time.perf_counter()
        with contextlib.contextmanager(original)(self) as db:
            if outer:
                start = time.perf_counter()  # BEGIN IMMEDIATE has returned: lock held
            yield db
        if outer:
            held.append((time.perf_counter() - start) * 1000)

    Database.atomic = timed  # type: ignore[method-assign,assignment]


def measure(label: str, ops: int, op: Callable[[int], Any], rows: list[dict[str, Any]]) -> None:
    calls: list[float] = []
    locks: list[float] = []
    for i in range(ops):
        held.clear()
        t = time.perf_counter()
        op(i)
        calls.append((time.perf_counter() - t) * 1000)
        locks.append(sum(held))
    calls.sort()
    locks.sort()
    rows.append(
        {
            "operation": label,
            "ops": ops,
            "call_p50_ms": statistics.median(calls),
            "lock_p50_ms": statistics.median(locks),
            "lock_p99_ms": locks[int(0.99 * (len(locks) - 1))],
            "lock_share": sum(locks) / max(sum(calls), 1e-9),
        }
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--embedder", default="static")
    parser.add_argument("--quick", action="store_true", help="50 operations per kind")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ops = 50 if args.quick else args.ops
    install_timer()
    rng = random.Random(3)
    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="mindfile-lock-") as tmp,
        mindfile.open(Path(tmp) / "lock.db", embedder=args.embedder) as mem,
    ):
        msgs = [chat_text(rng) for _ in range(ops * 101)]
        measure("store (1 kB message)", ops, lambda i: mem.store("a", i + 1, msgs[i]), rows)
        base = ops + 1

        def many(i: int) -> None:
            start = base + i * 100
            mem.store_many([("b", start + j, msgs[ops + i * 100 + j]) for j in range(100)])

        measure("store_many (100 x 1 kB)", max(ops // 10, 5), many, rows)
        measure("store_note", ops, lambda i: mem.store_note("memory:u", f"n{i}", msgs[i]), rows)
        measure("set_fact", ops, lambda i: mem.set_fact("u", "c", f"k{i}", msgs[i][:300]), rows)
        measure("delete_note", ops, lambda i: mem.delete_note("memory:u", f"n{i}"), rows)
    if args.json:
        emit_json({"benchmark": "mindfile-write-lock", "machine": machine_info(), "rows": rows})
    else:
        cols = ["operation", "ops", "call_p50_ms", "lock_p50_ms", "lock_p99_ms", "lock_share"]
        print_table(rows, cols, f"write-lock hold time per call ({args.embedder} embedder)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
