"""Search latency at scale on realistic chat text (a script, not a test).

Builds one on-disk store per vector index of ``--chunks`` chunks (default 117,000) of
assistant-chat-length messages (LoCoMo sentences recombined to ~950 characters, ~2.3
chunks each; ``_chat.py``) through ``mindfile.open(path).store_many``, with the bundled
embedder, then measures:

1. ingest: chunks/s and messages/s, full pipeline (chunking, embedding, SQLite, FTS5);
2. the first ``--first`` hybrid searches right after the bulk ingest (or ``--pause``
   seconds after it), in that process
   (the derived indexes catch up: the in-memory BM25 index builds in a background
   thread, the exact index loads and encodes its codes in another);
   then how long until the background work after the ingest was done
   (``settled_after_s``: the helper processes exited, the in-process builds ended);
3. steady state: hybrid, vector-only and fts-only p50/p95/p99 over ``--queries``
   held-out LoCoMo questions (never stored text), after ``--warm`` other ones if given,
   and hybrid over recommendation questions (``data/preferences.json``'s, cycled to
   ``--queries``: each adds the preference leg, a vector search filtered to the
   store's user-side statements);
4. a fresh process (``--cold-repeats`` times): import, ``mindfile.open``, first search,
   and p50/p99 of its first ``--queries`` searches counted from the very first;
5. memory: RSS / PSS / private MB of one process and of four processes searching the
   same store at once (after their indexes are built), from /proc;
6. disk: the store file with its WAL.

Examples::

    python benchmarks/scale.py                          # 117k chunks, exact index
    python benchmarks/scale.py --chunks 20000 --index exact,sqlite-vec
    python benchmarks/scale.py --store /tmp/s117k.db    # reuse a store: skip 1-2
    python benchmarks/scale.py --json > scale.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _chat import DEFAULT_LOCOMO, ChatCorpus, events
from _common import emit_json, log, machine_info, print_table
from _procs import disk_bytes, memory, pct, settle

import mindfile

MODES = ("hybrid", "vector", "fts")
#: Recommendation questions (the preference leg's): issue 14's preference set.
PREFERENCES = Path(__file__).resolve().parent / "data" / "preferences.json"
TARGET_P50_MS, TARGET_P99_MS = 5.0, 20.0
BENCH_DIR = str(Path(__file__).resolve().parent)


def timed_searches(eng: mindfile.Mindfile, queries: Sequence[str], mode: str) -> list[float]:
    out = []
    for q in queries:
        t0 = time.perf_counter()
        eng.search(q, mode=mode)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


# -- ingest --------------------------------------------------------------------------------


def build(
    path: Path, index: str, corpus: ChatCorpus, args: argparse.Namespace
) -> tuple[dict[str, Any], mindfile.Mindfile]:
    """A fresh store of at least ``args.chunks`` chunks; returns the ingest row and the
    still open engine (for the searches right after the ingest)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    eng = mindfile.open(path, vector_index=index)
    eng.embedder.embed_documents(["load the model before timing"])
    messages = corpus.messages()
    chunks = done = chars = 0
    wall = cpu = 0.0
    next_log = time.perf_counter() + 30
    while chunks < args.chunks:
        texts = [next(messages) for _ in range(args.batch)]
        batch = events(texts, done, args.sessions)
        c0, t0 = time.process_time(), time.perf_counter()
        chunks += eng.store_many(batch)
        wall += time.perf_counter() - t0
        cpu += time.process_time() - c0
        done += len(texts)
        chars += sum(map(len, texts))
        if time.perf_counter() > next_log:
            log(f"[{index}]   {chunks:,} chunks, {chunks / wall:,.0f}/s")
            next_log = time.perf_counter() + 30
    row = {
        "index": index,
        "messages": done,
        "chunks": chunks,
        "chunks_per_message": chunks / done,
        "message_chars_mean": chars / done,
        "seconds": wall,
        "cpu_s": cpu,
        "chunks_per_s": chunks / wall,
        "messages_per_s": done / wall,
    }
    return row, eng


# -- fresh processes -----------------------------------------------------------------------

_WORKER = r"""
import json, sys, time
t0 = time.perf_counter()
import mindfile
t1 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from _procs import memory, settle
cfg = json.loads(sys.stdin.read())
eng = mindfile.open(cfg["path"], vector_index=cfg["index"])
t2 = time.perf_counter()
while time.time() < cfg.get("start_at", 0):
    time.sleep(0.001)
lat = []
for q in cfg["queries"]:
    s = time.perf_counter()
    eng.search(q, mode=cfg["mode"])
    lat.append((time.perf_counter() - s) * 1e3)
out = {"import_ms": (t1 - t0) * 1e3, "open_ms": (t2 - t1) * 1e3, "latencies_ms": lat}
if cfg.get("settle"):
    settle(eng)
    settled = []
    for q in cfg["queries"][:50]:
        s = time.perf_counter()
        eng.search(q, mode=cfg["mode"])
        settled.append((time.perf_counter() - s) * 1e3)
    out["settled_ms"] = settled
    out.update(memory())
eng.close()
print(json.dumps(out))
"""


def spawn(cfg: dict[str, Any]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _WORKER, BENCH_DIR],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(cfg))
    proc.stdin.close()
    return proc


def collect(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    if proc.wait() != 0:
        raise RuntimeError(f"worker failed:\n{err}")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def cold_runs(path: Path, index: str, queries: list[list[str]]) -> dict[str, Any]:
    """Fresh processes one after another: open + first search + the first N searches."""
    runs = []
    for qs in queries:
        cfg = {"path": str(path), "index": index, "queries": qs, "mode": "hybrid"}
        wall0 = time.perf_counter()
        r = collect(spawn(cfg))
        r["process_wall_ms"] = (time.perf_counter() - wall0) * 1e3
        runs.append(r)
    med = {
        k: float(np.median([r[k] for r in runs]))
        for k in ("import_ms", "open_ms", "process_wall_ms")
    }
    firsts = [r["latencies_ms"][0] for r in runs]
    all_lat = [r["latencies_ms"] for r in runs]
    return {
        "index": index,
        "processes": len(runs),
        **med,
        "first_search_ms": float(np.median(firsts)),
        "first_search_max_ms": float(np.max(firsts)),
        "searches": len(all_lat[0]),
        # Percentiles per process, counted from its very first search; median of those.
        "p50_ms": float(np.median([np.percentile(x, 50) for x in all_lat])),
        "p99_ms": float(np.median([np.percentile(x, 99) for x in all_lat])),
        "first50_p50_ms": float(np.median([np.percentile(x[:50], 50) for x in all_lat])),
        "first50_max_ms": float(np.median([np.max(x[:50]) for x in all_lat])),
        "over_20ms": float(np.median([sum(v > 20 for v in x) for x in all_lat])),
    }


def memory_runs(path: Path, index: str, queries: list[str], procs: int) -> dict[str, Any]:
    """``procs`` processes search the same store at once, wait for their indexes, search
    again and report memory: per process and summed."""
    start_at = time.time() + 2.0  # after every process has imported and opened
    workers = [
        spawn(
            {
                "path": str(path),
                "index": index,
                "queries": queries,
                "mode": "hybrid",
                "settle": True,
                "start_at": start_at,
            }
        )
        for _ in range(procs)
    ]
    results = [collect(w) for w in workers]
    lat = [v for r in results for v in r["latencies_ms"]]
    settled = [v for r in results for v in r["settled_ms"]]
    return {
        "index": index,
        "processes": procs,
        "rss_mb_each": float(np.median([r["rss_mb"] for r in results])),
        "rss_mb_total": float(sum(r["rss_mb"] for r in results)),
        "pss_mb_total": float(sum(r["pss_mb"] for r in results)),
        "private_mb_total": float(sum(r["private_mb"] for r in results)),
        "anon_mb_total": float(sum(r.get("anon_mb", 0.0) for r in results)),
        "search_p50_ms": pct(lat)["p50_ms"],
        "search_p99_ms": pct(lat)["p99_ms"],
        "settled_p50_ms": pct(settled)["p50_ms"],
        "settled_p99_ms": pct(settled)["p99_ms"],
    }


# -- the run -------------------------------------------------------------------------------


def bench_index(index: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    corpus = ChatCorpus(args.locomo, args.seed)
    out: dict[str, Any] = {"index": index}
    qpos = 0

    def take(n: int) -> list[str]:
        nonlocal qpos
        qs = corpus.queries(n, qpos)
        qpos += n
        return qs

    if args.store is not None:
        path = args.store
        eng = mindfile.open(path, vector_index=index)
        log(f"[{index}] reusing {path}: {eng.info().chunks:,} chunks")
    else:
        path = workdir / f"scale-{index}.db"
        log(f"[{index}] ingest into {path} until {args.chunks:,} chunks")
        out["ingest"], eng = build(path, index, corpus, args)
        ingested_at = time.perf_counter()
        ing = out["ingest"]
        log(f"[{index}]   {ing['chunks']:,} chunks in {ing['seconds']:.0f} s")
        if args.pause:
            log(f"[{index}] pause {args.pause:g} s (as a user would between import and use)")
            time.sleep(args.pause)
        log(f"[{index}] the first {args.first} hybrid searches after the ingest")
        first = timed_searches(eng, take(args.first), "hybrid")
        out["after_ingest"] = {
            "index": index,
            "pause_s": args.pause,
            "searches": len(first),
            "first_ms": first[0] if first else None,
            **pct(first),
            "over_20ms": sum(v > 20 for v in first),
        }
    with eng:
        out["chunks"] = eng.info().chunks
        out["settle_s"] = settle(eng)
        if "after_ingest" in out:  # when the background work after the ingest was done
            out["after_ingest"]["settled_after_s"] = time.perf_counter() - ingested_at
        warm = take(20)
        for mode in MODES:
            timed_searches(eng, warm, mode)
        if args.warm:  # other questions first: common terms' cached bounds, page cache
            log(f"[{index}] {args.warm} other hybrid searches to warm up")
            timed_searches(eng, take(args.warm), "hybrid")
        out["search"] = []
        queries = take(args.queries)
        for mode in MODES:
            log(f"[{index}] {mode} x{len(queries)}")
            c0 = time.process_time()
            lat = timed_searches(eng, queries, mode)
            cpu_ms = (time.process_time() - c0) * 1e3 / len(queries)
            out["search"].append(
                {"index": index, "mode": mode, "n": len(lat), **pct(lat), "cpu_mean_ms": cpu_ms}
            )
        asks = recommendation_questions(len(queries))
        log(f"[{index}] hybrid, recommendation questions x{len(asks)}")
        timed_searches(eng, asks[:10], "hybrid")
        c0 = time.process_time()
        lat = timed_searches(eng, asks, "hybrid")
        cpu_ms = (time.process_time() - c0) * 1e3 / max(len(asks), 1)
        out["search"].append(
            {
                "index": index,
                "mode": "hybrid, recommendation",
                "n": len(lat),
                **pct(lat),
                "cpu_mean_ms": cpu_ms,
            }
        )
        out["this_process"] = memory()
    out["disk_mb"] = disk_bytes(path) / 1e6
    if args.cold_repeats:
        log(f"[{index}] {args.cold_repeats} fresh processes: open + {args.queries} searches")
        qs = [take(args.queries) for _ in range(args.cold_repeats)]
        out["cold"] = cold_runs(path, index, qs)
    out["memory"] = []
    for procs in sorted({1, args.procs}) if args.procs > 0 else []:
        log(f"[{index}] memory of {procs} process(es) searching at once")
        out["memory"].append(memory_runs(path, index, take(100), procs))
    return out


def recommendation_questions(n: int) -> list[str]:
    """``n`` recommendation questions ("Can you recommend a video editing course?"),
    cycling through the preference set's."""
    items = json.loads(PREFERENCES.read_text())["items"]
    pool = [str(item["question"]) for item in items]
    return [pool[i % len(pool)] for i in range(n)]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--chunks", type=int, default=117_000, help="store size in chunks")
    p.add_argument("--index", default="exact", help="vector indexes, comma-separated")
    p.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="locomo10.json")
    p.add_argument("--queries", type=int, default=300, help="timed searches per mode")
    p.add_argument("--first", type=int, default=50, help="searches timed after the ingest")
    p.add_argument(
        "--pause", type=float, default=0.0, help="seconds between the ingest and those searches"
    )
    p.add_argument(
        "--warm", type=int, default=0, help="other searches before the steady-state ones"
    )
    p.add_argument("--batch", type=int, default=200, help="messages per store_many call")
    p.add_argument("--sessions", type=int, default=1000, help="sessions the messages go to")
    p.add_argument("--cold-repeats", type=int, default=3, help="fresh processes (0: skip)")
    p.add_argument("--procs", type=int, default=4, help="processes for the memory run (0: skip it)")
    p.add_argument("--store", type=Path, default=None, help="reuse this store (no ingest)")
    p.add_argument("--workdir", type=Path, default=None, help="keep the stores here")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    args = p.parse_args(argv)
    args.indexes = [s.strip() for s in args.index.split(",") if s.strip()]
    if not args.indexes:
        p.error("--index needs at least one name")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="mindfile-scale-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for index in args.indexes:
            results.append(bench_index(index, args, workdir))
    report = {
        "benchmark": "mindfile-scale",
        "machine": machine_info(),
        "load_avg_1m": {"before": load_before, "after": os.getloadavg()[0]},
        "config": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k not in ("json",)
        },
        "results": results,
        "elapsed_s": time.perf_counter() - t0,
    }
    print_report(report, sys.stderr if args.json else sys.stdout)
    if args.json:
        emit_json(report)
    return 0


def print_report(report: dict[str, Any], out: Any) -> None:
    m, cfg = report["machine"], report["config"]
    print(
        f"Mindfile scale benchmark - {m['platform']}, {m['cpu_count']} CPUs, Python "
        f"{m['python']}, numpy {m['numpy']}, SQLite {m['sqlite']}; load avg "
        f"{report['load_avg_1m']['before']:.2f} -> {report['load_avg_1m']['after']:.2f}; "
        f"run took {report['elapsed_s']:.0f} s\n"
        f"data: LoCoMo sentences recombined ({cfg['locomo']}), {cfg['sessions']} sessions",
        file=out,
    )
    res = report["results"]
    ingest = [r["ingest"] for r in res if "ingest" in r]
    if ingest:
        print_table(
            ingest,
            [
                "index",
                "messages",
                "chunks",
                "chunks_per_message",
                "message_chars_mean",
                "seconds",
                "cpu_s",
                "chunks_per_s",
                "messages_per_s",
            ],
            "Bulk ingest (store_many, full pipeline incl. embedding)",
            file=out,
        )
        print_table(
            [r["after_ingest"] for r in res if "after_ingest" in r],
            [
                "index",
                "pause_s",
                "searches",
                "first_ms",
                "p50_ms",
                "p95_ms",
                "max_ms",
                "over_20ms",
                "settled_after_s",
            ],
            "The first hybrid searches after the bulk ingest (same process)",
            file=out,
        )
    rows = []
    for r in res:
        for s in r["search"]:
            ok = None
            if s["mode"] == "hybrid":
                ok = s["p50_ms"] <= TARGET_P50_MS and s["p99_ms"] <= TARGET_P99_MS
            rows.append({**s, "chunks": r["chunks"], "p50<=5 p99<=20": ok})
    print_table(
        rows,
        [
            "index",
            "chunks",
            "mode",
            "n",
            "p50_ms",
            "p95_ms",
            "p99_ms",
            "mean_ms",
            "max_ms",
            "cpu_mean_ms",
            "p50<=5 p99<=20",
        ],
        "Search latency, steady state (end to end, query embedding included, top_k=10)",
        file=out,
    )
    cold = [r["cold"] for r in res if "cold" in r]
    if cold:
        print_table(
            cold,
            [
                "index",
                "processes",
                "import_ms",
                "open_ms",
                "first_search_ms",
                "first_search_max_ms",
                "first50_p50_ms",
                "first50_max_ms",
                "searches",
                "p50_ms",
                "p99_ms",
                "over_20ms",
            ],
            "A fresh process: open, first search, percentiles from the very first search"
            " (median over processes)",
            file=out,
        )
    mem = [{**m_, "disk_mb": r["disk_mb"]} for r in res for m_ in r["memory"]]
    if mem:
        print_table(
            mem,
            [
                "index",
                "processes",
                "rss_mb_each",
                "rss_mb_total",
                "pss_mb_total",
                "private_mb_total",
                "anon_mb_total",
                "search_p50_ms",
                "search_p99_ms",
                "settled_p50_ms",
                "settled_p99_ms",
                "disk_mb",
            ],
            "Memory of processes searching one store at once (indexes built), and disk",
            file=out,
        )


if __name__ == "__main__":
    sys.exit(main())
