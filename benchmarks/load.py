"""Open-loop load test: a mixed store/search load against one store (a script, not a test).

``--procs`` processes each open the same store (~100k chunks of realistic chat text,
built first unless ``--store`` names one) and wait until their indexes are built. Then,
for ``--seconds``, operations arrive at ``--rate`` per second in total, as a Poisson
process (seeded), ``--store-share`` of them ``store`` calls (a new ~950-character
message each, in the process's own sessions) and the rest hybrid ``search`` calls
(held-out LoCoMo questions). Each process runs ``--threads`` worker threads on one
engine, each with its own arrival schedule; an operation's latency is measured from
its *scheduled* arrival, so time spent queued behind earlier operations counts
(open loop: the offered rate does not slow down when the store does).

Reports the achieved rate, per-operation count, p50/p99/max latency from the scheduled
time and the service time alone, errors, and each process's memory over time.

Examples::

    python benchmarks/load.py --rate 1000 --seconds 60 --procs 2
    python benchmarks/load.py --rates 50,100,200,400 --seconds 30 --store /tmp/s.db
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _chat import DEFAULT_LOCOMO, ChatCorpus, events
from _common import emit_json, log, machine_info, print_table
from _procs import disk_bytes, memory, pct, settle

import mindfile

BENCH_DIR = str(Path(__file__).resolve().parent)
SESSIONS = 1000


def ensure_store(path: Path, chunks: int, corpus: ChatCorpus) -> dict[str, Any]:
    """Build a store of at least ``chunks`` chunks at ``path`` (if it is not there)."""
    if path.exists():
        with mindfile.open(path) as eng:
            return {"chunks": eng.info().chunks, "built_s": None}
    t0 = time.perf_counter()
    messages = corpus.messages()
    done = have = 0
    with mindfile.open(path) as eng:
        while have < chunks:
            texts = [next(messages) for _ in range(200)]
            have += eng.store_many(events(texts, done, SESSIONS))
            done += len(texts)
    return {"chunks": have, "built_s": time.perf_counter() - t0}


# -- one load process ----------------------------------------------------------------------


def resources(start: float) -> dict[str, float]:
    """This process's memory (:func:`_procs.memory`), open file descriptors and threads,
    at ``t`` seconds after ``start``: a long run shows whether any of them only grows."""
    try:
        fds = len(os.listdir("/proc/self/fd"))
    except OSError:  # not Linux
        fds = -1
    return {
        "t": time.time() - start,
        **memory(),
        "fds": float(fds),
        "threads": float(threading.active_count()),
    }


def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    """Run in a child process: open, settle, say ready, wait for the start, offer load."""
    corpus = ChatCorpus(Path(cfg["locomo"]), cfg["seed"])
    rng = random.Random(cfg["seed"])
    eng = mindfile.open(cfg["path"], vector_index=cfg["index"])
    settle(eng)
    for q in corpus.queries(20, cfg["query_offset"]):
        eng.search(q)
    print("ready", flush=True)
    start = float(sys.stdin.readline())
    end = start + cfg["seconds"]
    per_thread = cfg["rate"] / cfg["threads"]
    queries = corpus.queries(20_000, cfg["query_offset"] + 20)
    mem_series: list[dict[str, float]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(5.0):  # reading smaps_rollup is not free
            mem_series.append(resources(start))

    results: list[list[tuple[str, float, float, float, str | None]]] = []
    texts_lock = threading.Lock()

    def run(t: int) -> None:
        local = random.Random(rng.random())
        out: list[tuple[str, float, float, float, str | None]] = []
        results.append(out)
        session = f"load-{cfg['proc']}-{t}"
        seq = 0
        due = start
        while True:
            due += local.expovariate(per_thread)
            if due >= end:
                return
            if time.time() > end + cfg["grace"]:
                return  # hopelessly behind: the rest counts as dropped
            is_store = local.random() < cfg["store_share"]
            if is_store:
                with texts_lock:
                    text = corpus.message()
            wait = due - time.time()
            if wait > 0:
                time.sleep(wait)
            began = time.time()
            error = None
            try:
                if is_store:
                    eng.store(session, seq, {"role": "user", "content": text})
                    seq += 1
                else:
                    eng.search(queries[local.randrange(len(queries))])
            except Exception as exc:  # counted, not raised: the load goes on
                error = type(exc).__name__
            done = time.time()
            kind = "store" if is_store else "search"
            out.append((kind, due - start, (done - due) * 1e3, (done - began) * 1e3, error))

    mem_series.append(resources(start))  # before the load
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    threads = [threading.Thread(target=run, args=(t,)) for t in range(cfg["threads"])]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    finished = time.time()
    stop.set()
    eng.close()
    ops = [op for out in results for op in out]
    if cfg.get("trace"):
        with open(f"{cfg['trace']}.{cfg['proc']}.json", "w") as f:
            json.dump(ops, f)
    return {
        "ops": ops,
        "finished_s": finished - start,
        "memory": mem_series,
        "offered": sum(1 for _ in ops),
    }


_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from load import worker
cfg = json.loads(sys.stdin.readline())
print(json.dumps(worker(cfg)), flush=True)
"""


# -- one run at one rate -------------------------------------------------------------------


def run_rate(path: Path, rate: float, args: argparse.Namespace) -> dict[str, Any]:
    procs = []
    for p in range(args.procs):
        cfg = {
            "path": str(path),
            "index": args.index,
            "locomo": str(args.locomo),
            "seed": args.seed * 1000 + p,
            "proc": f"{os.getpid()}-{int(rate)}-{p}",
            "query_offset": 97 * p,
            "rate": rate / args.procs,
            "threads": args.threads,
            "seconds": args.seconds,
            "store_share": args.store_share,
            "grace": args.grace,
            "trace": str(args.trace) if args.trace else None,
        }
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, BENCH_DIR],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(cfg) + "\n")
        proc.stdin.flush()
        procs.append(proc)
    for proc in procs:  # every process has loaded its indexes
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"a load process failed to start ({line!r})")
    start = time.time() + 0.5
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(f"{start}\n")
        proc.stdin.close()
    outs = []
    for proc in procs:
        assert proc.stdout is not None
        text = proc.stdout.read()
        if proc.wait() != 0:
            raise RuntimeError("a load process failed")
        outs.append(json.loads(text.strip().splitlines()[-1]))
    return summarise(rate, outs, args)


def summarise(rate: float, outs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    ops = [op for o in outs for op in o["ops"]]
    span = max(o["finished_s"] for o in outs)
    row: dict[str, Any] = {
        "rate": rate,
        "procs": args.procs,
        "threads": args.threads,
        "completed": len(ops),
        "achieved_per_s": len(ops) / max(span, 1e-9),
        "in_window_per_s": sum(1 for op in ops if op[1] + op[2] / 1e3 <= args.seconds)
        / args.seconds,
        "errors": sum(1 for op in ops if op[4] is not None),
        "drain_s": max(0.0, span - args.seconds),
    }
    error_kinds: dict[str, int] = {}
    for op in ops:
        if op[4] is not None:
            error_kinds[op[4]] = error_kinds.get(op[4], 0) + 1
    row["error_kinds"] = error_kinds
    for kind in ("store", "search"):
        lat = [op[2] for op in ops if op[0] == kind and op[4] is None]
        svc = [op[3] for op in ops if op[0] == kind and op[4] is None]
        p, s = pct(lat), pct(svc)
        row[f"{kind}_n"] = len(lat)
        row[f"{kind}_p50_ms"] = p["p50_ms"]
        row[f"{kind}_p99_ms"] = p["p99_ms"]
        row[f"{kind}_max_ms"] = p["max_ms"]
        row[f"{kind}_service_p50_ms"] = s["p50_ms"]
    # Memory of all load processes at fixed times of the offered window (the sample
    # nearest each): RSS counts the mapped index files' pages a process touched (page
    # cache, shared); anonymous memory is what each process holds of its own.
    series = []
    seconds = int(args.seconds)
    for t in range(0, seconds + 1, max(1, seconds // 6)):
        near = [min(o["memory"], key=lambda m, t=t: abs(m["t"] - t)) for o in outs if o["memory"]]
        series.append(
            {
                "t": t,
                "rss_mb_total": float(sum(m["rss_mb"] for m in near)),
                "anon_mb_total": float(sum(m["anon_mb"] for m in near)),
            }
        )
    row["rss_series"] = series
    for key in ("rss", "anon"):
        row[f"{key}_mb_start"] = series[0][f"{key}_mb_total"] if series else None
        row[f"{key}_mb_end"] = series[-1][f"{key}_mb_total"] if series else None
    for key in ("fds", "threads"):  # of all load processes, first and last sample
        row[f"{key}_start"] = sum(int(o["memory"][0][key]) for o in outs if o["memory"])
        row[f"{key}_end"] = sum(int(o["memory"][-1][key]) for o in outs if o["memory"])
    return row


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--rate", type=float, default=1000.0, help="offered operations/s")
    p.add_argument("--rates", default=None, help="several rates, comma-separated")
    p.add_argument("--seconds", type=float, default=60.0, help="how long load is offered")
    p.add_argument("--procs", type=int, default=2, help="load processes")
    p.add_argument("--threads", type=int, default=4, help="worker threads per process")
    p.add_argument("--store-share", type=float, default=0.3, help="share of store calls")
    p.add_argument("--chunks", type=int, default=100_000, help="store size to build")
    p.add_argument("--store", type=Path, default=None, help="use (a copy of) this store")
    p.add_argument("--index", default="exact", help="vector index name")
    p.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="locomo10.json")
    p.add_argument("--grace", type=float, default=30.0, help="seconds to drain a backlog")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument(
        "--trace",
        type=Path,
        default=None,
        help="write each process's operations to TRACE.<proc>.json",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    args = p.parse_args(argv)
    raw = args.rates if args.rates else str(args.rate)
    args.rate_list = [float(r) for r in raw.split(",") if r.strip()]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="mindfile-load-") as tmp:
        for rate in args.rate_list:
            path = Path(tmp) / f"load-{int(rate)}.db"
            if args.store is not None:  # every run starts from the same store
                subprocess.run(["cp", "--sparse=always", str(args.store), str(path)], check=True)
                index = Path(f"{args.store}.index")  # the published indexes, as a service has
                if index.is_dir():
                    subprocess.run(["cp", "-r", str(index), f"{path}.index"], check=True)
                os.sync()  # else the copy's writeback lands in the first seconds of load
                store = {"chunks": None, "built_s": None}
            else:
                log(f"building a store of {args.chunks:,} chunks")
                store = ensure_store(path, args.chunks, ChatCorpus(args.locomo, args.seed))
                args.store = Path(tmp) / "base.db"
                subprocess.run(["cp", str(path), str(args.store)], check=True)
            with mindfile.open(path) as eng:
                store["chunks"] = eng.info().chunks
            log(
                f"rate {rate:g}/s: {args.procs} processes x {args.threads} threads, "
                f"{args.seconds:g} s, {store['chunks']:,} chunks"
            )
            row = run_rate(path, rate, args)
            row["chunks_before"] = store["chunks"]
            row["disk_mb_after"] = disk_bytes(path) / 1e6
            log(
                f"  achieved {row['achieved_per_s']:.0f}/s; search p50 "
                f"{row['search_p50_ms']} p99 {row['search_p99_ms']}; store p50 "
                f"{row['store_p50_ms']} p99 {row['store_p99_ms']}; errors {row['errors']}"
            )
            rows.append(row)
    report = {
        "benchmark": "mindfile-load",
        "machine": machine_info(),
        "load_avg_1m": {"before": load_before, "after": os.getloadavg()[0]},
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "runs": rows,
        "elapsed_s": time.perf_counter() - t0,
    }
    out = sys.stderr if args.json else sys.stdout
    m = report["machine"]
    print(
        f"Mindfile load test - {m['platform']}, {m['cpu_count']} CPUs, Python {m['python']}; "
        f"load avg {load_before:.2f} -> {report['load_avg_1m']['after']:.2f}; "
        f"{args.procs} processes x {args.threads} threads, {args.store_share:.0%} store, "
        f"{args.seconds:g} s per rate, index {args.index}",
        file=out,
    )
    print_table(
        rows,
        [
            "rate",
            "achieved_per_s",
            "in_window_per_s",
            "drain_s",
            "errors",
            "search_n",
            "search_p50_ms",
            "search_p99_ms",
            "search_service_p50_ms",
            "store_n",
            "store_p50_ms",
            "store_p99_ms",
            "store_service_p50_ms",
            "rss_mb_start",
            "rss_mb_end",
            "anon_mb_start",
            "anon_mb_end",
            "fds_start",
            "fds_end",
            "threads_start",
            "threads_end",
        ],
        "Open-loop mixed load (latency from the scheduled arrival)",
        file=out,
    )
    for key, title in (("rss", "RSS"), ("anon", "Anonymous memory")):
        series = [
            {"rate": r["rate"], **{f"t={p['t']}s": p[f"{key}_mb_total"] for p in r["rss_series"]}}
            for r in rows
        ]
        columns = list(dict.fromkeys(k for row in series for k in row))
        print_table(series, columns, f"{title} of all load processes over the run, MB", file=out)
    if args.json:
        emit_json(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
