"""Each leg of a hybrid search on its own, and the search: latency and page faults
(a script, not a test).

Opens a store (e.g. one left by ``scale.py --workdir``, or a 1M one), waits until its
indexes are built, answers ``--warm`` held-out LoCoMo questions, then times
``--queries`` more three ways, one after the other for each question: the BM25 leg
alone (the index's top ``candidates`` hits, as a hybrid search asks it), the vector
leg alone (the vector index's top ``candidates``, query embedding excluded), and the
hybrid search end to end. Minor page faults are counted over each kind (``getrusage``),
so a search that allocates and frees large arrays shows up (benchmarks/README.md,
"Page faults and pruning at 1M"). ``MINDFILE_HEAP_TUNING=0`` compares the untuned heap.

Examples::

    python benchmarks/legs.py --store /tmp/scale/run1/scale-exact.db
    python benchmarks/legs.py --store S1M.db --index zvec --queries 600 --json
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _chat import DEFAULT_LOCOMO, ChatCorpus
from _common import emit_json, log, machine_info, percentiles_ms, print_table
from _procs import settle

import mindfile
from mindfile import _heap
from mindfile.retrieve.search import DEFAULT_CANDIDATES


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def timed(calls: dict[str, Callable[[str], Any]], queries: list[str]) -> dict[str, dict[str, Any]]:
    """Each question through every call in turn; per call: latency percentiles and
    minor page faults per call."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    faults = dict.fromkeys(calls, 0)
    for q in queries:
        for name, call in calls.items():
            f0 = _faults()
            t0 = time.perf_counter()
            call(q)
            samples[name].append((time.perf_counter() - t0) * 1e3)
            faults[name] += _faults() - f0
    return {
        name: {**percentiles_ms(samples[name]), "faults_per_call": faults[name] / len(queries)}
        for name in calls
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--store", type=Path, required=True)
    p.add_argument("--index", default="exact", help="the store's vector index")
    p.add_argument("--queries", type=int, default=600)
    p.add_argument("--warm", type=int, default=100, help="questions answered first")
    p.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    args = p.parse_args(argv)
    if not args.store.is_file():
        raise SystemExit(f"no store at {args.store}")
    corpus = ChatCorpus(args.locomo, args.seed)
    questions = corpus.queries(args.warm + args.queries)
    with mindfile.open(args.store, vector_index=args.index) as eng:
        log(f"settling {args.store}")
        settle(eng)
        bm25 = eng.lexical
        if bm25 is None:
            raise SystemExit("the store has no in-memory BM25 index (lexical_index='fts5')")
        chunks = eng.index.size()
        embed = eng.embedder.embed_query
        vectors = {q: embed(q) for q in questions}
        calls: dict[str, Callable[[str], Any]] = {
            "bm25 leg": lambda q: bm25.search(q, DEFAULT_CANDIDATES),
            "vector leg": lambda q: eng.index.search(vectors[q], DEFAULT_CANDIDATES),
            "hybrid search": lambda q: eng.search(q),
        }
        log(f"{args.warm} warm-up questions, then {args.queries} timed")
        timed(calls, questions[: args.warm])
        results = timed(calls, questions[args.warm :])
    rows = [
        {"index": args.index, "chunks": chunks, "call": name, **stats}
        for name, stats in results.items()
    ]
    if args.json:
        emit_json({"machine": machine_info(), "heap_tuned": _heap.tuned(), "rows": rows})
        return 0
    print(f"heap tuning: {'on' if _heap.tuned() else 'off'} (MINDFILE_HEAP_TUNING)")
    print_table(
        rows,
        [
            "index",
            "chunks",
            "call",
            "p50_ms",
            "p95_ms",
            "p99_ms",
            "mean_ms",
            "max_ms",
            "faults_per_call",
        ],
        f"Each leg alone and the hybrid search ({args.queries} held-out questions)",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
