"""Where a search spends its time: py-spy samples a loop of searches (a script).

Opens a store (e.g. one left by ``scale.py --workdir``), waits until its indexes are
built, then runs ``--searches`` searches of held-out LoCoMo questions while py-spy
(``pip install py-spy``; it needs ptrace rights) samples this process. The samples
are folded into inclusive shares per function: the share of samples in which the
function was on the stack. Functions of mindfile, numpy, apsw and model2vec are shown.

Examples::

    python benchmarks/profile_search.py --store /tmp/scale/run1/scale-exact.db
    python benchmarks/profile_search.py --store s.db --mode vector --rate 200
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _chat import DEFAULT_LOCOMO, ChatCorpus
from _common import print_table
from _procs import settle

import mindfile

KEEP = ("mindfile", "numpy", "apsw", "model2vec", "tokenizers")


def fold(path: Path, top: int) -> tuple[int, list[dict[str, object]]]:
    """Inclusive sample shares per function from py-spy's collapsed ``--format raw``."""
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        seen = set()
        for frame in stack.split(";"):
            name = frame.split(" (")[0]
            where = frame.split(" (")[1] if " (" in frame else ""
            if not any(k in where for k in KEEP) and "search" not in name:
                continue
            short = where.split("site-packages/")[-1].split("src/")[-1].split(":")[0]
            key = f"{name} ({short})"
            if key not in seen:
                seen.add(key)
                inclusive[key] += n
    rows: list[dict[str, object]] = [
        {"function": k, "samples": v, "share": v / max(total, 1)}
        for k, v in inclusive.most_common(top)
    ]
    return total, rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--store", type=Path, required=True)
    p.add_argument("--mode", default="hybrid", choices=["hybrid", "vector", "fts"])
    p.add_argument("--searches", type=int, default=3000)
    p.add_argument("--index", default="exact")
    p.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    p.add_argument("--keep", type=Path, default=None, help="keep py-spy's raw output here")
    args = p.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    queries = ChatCorpus(args.locomo).queries(args.searches)
    # Read-only where the index allows it (zvec and lancedb keep theirs writable).
    read_only = args.index in ("exact", "sqlite-vec")
    with mindfile.open(args.store, vector_index=args.index, read_only=read_only) as eng:
        settle(eng)
        for q in queries[:50]:
            eng.search(q, mode=args.mode)
        with tempfile.TemporaryDirectory() as tmp:
            raw = args.keep or Path(tmp) / "raw.txt"
            command = [spy, "record", "--pid", str(os.getpid()), "--rate", str(args.rate)]
            command += ["--format", "raw", "--output", str(raw), "--nonblocking"]
            sampler = subprocess.Popen(
                command,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)  # py-spy attaches
            t0 = time.perf_counter()
            for q in queries:
                eng.search(q, mode=args.mode)
            elapsed = time.perf_counter() - t0
            sampler.send_signal(2)  # SIGINT: py-spy writes its output and exits
            sampler.wait(timeout=60)
            total, rows = fold(raw, args.top)
    print(
        f"{args.searches} {args.mode} searches in {elapsed:.1f} s "
        f"({elapsed / args.searches * 1e3:.2f} ms each), {total} samples"
    )
    print_table(rows, ["function", "samples", "share"], "Inclusive share of samples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
