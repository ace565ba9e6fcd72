"""Run every benchmark and regenerate ``benchmarks/RESULTS.md``, stamped with the commit.

One command refreshes all the measured tables::

    python benchmarks/run_all.py            # the full set (tens of minutes on 2 cores)
    python benchmarks/run_all.py --quick    # smaller sizes, for a smoke run
    python benchmarks/run_all.py --only locomo,latency

Each script runs in its own process (so one's memory or threads cannot skew the next)
with its text tables captured verbatim. The page records the commit (and whether the
tree had uncommitted changes), the date, the machine, the load average before each run
and each script's exact command, so any number can be traced to the code that made it.
``benchmarks/README.md`` explains the numbers; ``RESULTS.md`` is never edited by hand.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from _common import emit_json, machine_info

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass(frozen=True)
class Bench:
    """One benchmark script and its arguments (full run, quick run)."""

    name: str
    script: str
    full: tuple[str, ...]
    quick: tuple[str, ...]


#: Every benchmark, in the order they run. Scripts that need a file that is not here
#: (an optional dataset) are skipped with a note, never silently.
BENCHES = (
    Bench("locomo", "locomo.py", (), ("--limit", "2")),
    Bench("prefix_check", "prefix_check.py", (), ()),
    Bench("latency", "latency.py", (), ("--quick",)),
    Bench("background_indexing", "background_indexing.py", (), ("--quick",)),
    Bench("durability", "durability.py", (), ("--quick",)),
    Bench("write_lock", "write_lock.py", (), ("--quick",)),
    Bench("purge", "purge.py", ("--sizes", "20000,100000"), ("--quick",)),
    Bench("embedding_cache", "embedding_cache.py", (), ("--quick",)),
    Bench("embedders", "embedders.py", (), ("--texts", "64")),
    Bench("file_sync", "file_sync.py", (), ("--max-chars", "1000")),
    Bench("http_latency", "http_latency.py", (), ("--quick",)),
    Bench(
        "locomo_onnx",
        "locomo.py",
        ("--embedder", "onnx:minilm"),
        ("--embedder", "onnx:minilm", "--limit", "2"),
    ),
)


def git(*args: str) -> str:
    """A git answer about this checkout, or ``unknown`` outside one."""
    try:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip()


def run_one(bench: Bench, quick: bool) -> dict[str, object]:
    """Run one script; its stdout is the table text, its stderr goes to our stderr."""
    args = bench.quick if quick else bench.full
    cmd = [sys.executable, str(HERE / bench.script), *args]
    shown = " ".join(["python", f"benchmarks/{bench.script}", *args])
    if not (HERE / bench.script).exists():
        return {"name": bench.name, "command": shown, "status": "missing", "output": ""}
    load = os.getloadavg()[0]
    print(f"== {shown}  (load {load:.2f})", file=sys.stderr, flush=True)
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=False)
    return {
        "name": bench.name,
        "command": shown,
        "status": "ok" if proc.returncode == 0 else f"exit {proc.returncode}",
        "seconds": round(time.perf_counter() - started, 1),
        "load_before": round(load, 2),
        "output": proc.stdout.strip(),
    }


def render(runs: Sequence[dict[str, object]], stamp: dict[str, object]) -> str:
    """The RESULTS.md page."""
    machine = stamp["machine"]
    assert isinstance(machine, dict)
    lines = [
        "# Benchmark results (generated)",
        "",
        "Written by `python benchmarks/run_all.py"
        + (" --quick" if stamp["quick"] else "")
        + "`; do not edit by hand. What the numbers mean: [README.md](README.md).",
        "",
        f"- commit: `{stamp['commit']}`"
        + (" (with uncommitted changes)" if stamp["dirty"] else ""),
        f"- date: {stamp['date']}",
        f"- machine: {machine.get('cpu_count')} CPUs, Python {machine.get('python')}, "
        f"numpy {machine.get('numpy')}, SQLite {machine.get('sqlite')}, "
        f"{machine.get('platform')}",
        "",
    ]
    for run in runs:
        lines += [f"## {run['name']}", "", f"`{run['command']}`"]
        if run["status"] == "missing":
            lines += ["", "(script not present at this commit)", ""]
            continue
        lines[-1] += (
            f" — {run['status']}, {run['seconds']} s, load average before {run['load_before']}"
        )
        lines += ["", "```", str(run["output"]), "```", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the scripts' --quick sizes")
    parser.add_argument("--only", default="", help="comma-separated names to run")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--json", action="store_true", help="print the runs as JSON too")
    args = parser.parse_args(argv)
    wanted = {n for n in args.only.split(",") if n}
    unknown = wanted - {b.name for b in BENCHES}
    if unknown:
        parser.error(f"unknown benchmarks: {sorted(unknown)}")
    stamp: dict[str, object] = {
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_info(),
        "quick": args.quick,
    }
    runs = [run_one(b, args.quick) for b in BENCHES if not wanted or b.name in wanted]
    args.out.write_text(render(runs, stamp) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    if args.json:
        emit_json({"stamp": stamp, "runs": runs})
    failed = [r["name"] for r in runs if str(r["status"]).startswith("exit")]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
