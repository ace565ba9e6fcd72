"""Long thread stress run: many threads on one engine, every operation, a watchdog.

    python scripts/stress_threads.py --minutes 10            # the issue-16 acceptance run
    python scripts/stress_threads.py --minutes 1 --json

Same harness as tests/core/test_thread_stress.py (tests/core/_stress.py), run for
longer, with ``sys.setswitchinterval(1e-6)``. Prints operations completed per kind and
exits 1 on a stall (no operation completing for --stall seconds: the stacks of every
thread are printed) or on any unexpected error.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from core._stress import run_stress


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--stall", type=float, default=10.0, help="watchdog seconds")
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--index", default="exact", help="vector index (exact, sqlite-vec)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mindfile-stress-") as tmp:
        report = run_stress(
            Path(tmp) / "stress.db",
            seconds=args.minutes * 60,
            threads=args.threads,
            stall_seconds=args.stall,
            embedder=args.embedder,
            vector_index=args.index,
            seed=args.seed,
        )
    ok = report.stalled is None and not report.failures
    if args.json:
        print(
            json.dumps(
                {
                    "ok": ok,
                    "seconds": round(report.seconds, 1),
                    "threads": args.threads,
                    "index": args.index,
                    "ops": dict(report.ops),
                    "expected_errors": dict(report.expected_errors),
                    "failures": report.failures[:20],
                    "stalled": report.stalled,
                },
                indent=2,
            )
        )
    else:
        print(
            f"\nthread stress: {args.threads} threads, {report.seconds:.0f} s, index {args.index}"
        )
        print(f"{'operation':<18} {'completed':>10} {'per s':>8}")
        for name, n in sorted(report.ops.items()):
            print(f"{name:<18} {n:>10} {n / report.seconds:>8.1f}")
        print(f"{'total':<18} {report.total:>10} {report.total / report.seconds:>8.1f}")
        if report.expected_errors:
            print("expected errors (lost races):", dict(report.expected_errors))
        print("result:", "OK, no stall, no unexpected error" if ok else "FAILED")
        for failure in report.failures[:10]:
            print("  ", failure)
        if report.stalled:
            print(report.stalled)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
