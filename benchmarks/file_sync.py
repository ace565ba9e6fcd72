"""File sync on a real tree: the Python standard library of the running interpreter.

    python benchmarks/file_sync.py [--max-chars 1000] [--embedder static] [--json]

Copies ``Lib/`` (~2,000 files) to a scratch folder, then measures: the first sync (files,
MB and chunks per second, bundled embedder by default), an unchanged re-sync, a re-sync
after editing 1% of the files (one line appended), and hybrid search latency over the
files (p50/p99 of 200 queries). Targets (issue 9, 2-core machine): first sync >= 5 MB/s,
unchanged re-sync of 10,000 files <= 1 s, 1% edited <= 2 s, search p50 <= 5 ms.

The first sync also reports CPU-seconds (user + system) of this process and of the
bundled embedder's helper process (Linux), which hold up better than wall time on a
shared machine, and the load average when it started.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit_json, machine_info, print_table
from _procs import settle

import mindfile
from mindfile.files import LineSpec


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-chars", type=int, default=1000)
    parser.add_argument("--embedder", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    lib = Path(os.__file__).parent
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "Lib"
        shutil.copytree(lib, tree, ignore=shutil.ignore_patterns("__pycache__", "site-packages"))
        with mindfile.open(Path(tmp) / "m.db", embedder=args.embedder) as mem:
            spec = LineSpec(max_chars=args.max_chars)
            load = os.getloadavg()[0]
            before = resource.getrusage(resource.RUSAGE_SELF)
            first = mindfile.files.sync(mem, [tree], lines=spec)
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            mb = first.bytes_read / 1e6
            rows.append(
                {
                    "run": "first sync",
                    "files": first.added,
                    "seconds": first.seconds,
                    "files_per_s": first.added / first.seconds,
                    "mb_per_s": mb / first.seconds,
                    "chunks_per_s": first.chunks_added / first.seconds,
                    "embedded": first.embedded,
                    "cpu_s": cpu,
                    "helper_cpu_s": _helper_cpu(mem),
                    "load": load,
                }
            )
            again = mindfile.files.sync(mem, [tree], lines=spec)
            rows.append(
                {
                    "run": "unchanged re-sync",
                    "files": again.unchanged,
                    "seconds": again.seconds,
                    "files_per_s": again.unchanged / again.seconds,
                    "embedded": again.embedded,
                }
            )
            files = sorted(p for p in tree.rglob("*.py") if p.is_file())
            rng = random.Random(1)
            edited = rng.sample(files, max(1, (first.added + first.unchanged) // 100))
            for path in edited:
                with path.open("a", encoding="utf-8") as handle:
                    handle.write("\n# edited by the benchmark\n")
            changed = mindfile.files.sync(mem, [tree], lines=spec)
            rows.append(
                {
                    "run": f"1% edited ({len(edited)} files)",
                    "files": changed.updated,
                    "seconds": changed.seconds,
                    "embedded": changed.embedded,
                }
            )
            words = [
                "socket timeout",
                "parse a date",
                "json decoder error",
                "thread lock",
                "http request headers",
                "unicode normalization",
                "zip archive",
                "regular expression groups",
                "email message parser",
                "subprocess pipe",
            ]
            t = time.perf_counter()
            mem.search("first query after the sync", source="files", top_k=10)
            first_ms = (time.perf_counter() - t) * 1000
            # Steady state: the in-memory BM25 index has finished building (until then
            # searches use the slower FTS5 path; docs/retrieval.md).
            deadline = time.monotonic() + 120
            while mem.lexical is not None and not mem.lexical.ready and time.monotonic() < deadline:
                time.sleep(0.1)
            # ... and the indexes' background publishing (after a sync this big the
            # engine's idle follower publishes both; searches would compete with it).
            time.sleep(1.5)  # the follower starts 1 s after the last write
            settle(mem)
            times = []
            for i in range(200):
                t = time.perf_counter()
                mem.search(words[i % len(words)], source="files", top_k=10)
                times.append((time.perf_counter() - t) * 1000)
            times.sort()
            chunks = int(mem.db.scalar("SELECT count(*) FROM chunks"))
            rows.append(
                {
                    "run": f"hybrid search ({chunks} chunks)",
                    "first_ms": first_ms,
                    "p50_ms": statistics.median(times),
                    "p99_ms": times[int(0.99 * (len(times) - 1))],
                }
            )
    if args.json:
        emit_json({"machine": machine_info(), "max_chars": args.max_chars, "rows": rows})
        return 0
    columns = ["run", "files", "seconds", "files_per_s", "mb_per_s", "chunks_per_s"]
    columns += ["embedded", "cpu_s", "helper_cpu_s", "load", "first_ms", "p50_ms", "p99_ms"]
    print_table(
        rows,
        columns,
        f"file sync of the standard library (Lib/), chunks of <= {args.max_chars} chars",
    )
    return 0


def _helper_cpu(mem: mindfile.Mindfile) -> float | None:
    """CPU-seconds so far of the embedder's helper process (embed/_worker.py), if any."""
    proc = getattr(getattr(mem.embedder, "_worker", None), "_proc", None)
    if proc is None:
        return None
    try:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    raise SystemExit(main())
