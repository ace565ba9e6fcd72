"""A store that keeps growing: a bulk ingest into an existing store while another
process searches it, and how far the indexes lag.

    python benchmarks/grow.py --store S [--index zvec] [--chunks 80000] [--after 15]
                              [--repeats 2] [--json]
    python benchmarks/grow.py --base 117000 ...     # build S first (in a temp folder)

Each run copies the store (and its ``.index`` folder) afresh, starts a process that
runs hybrid searches (held-out questions) back to back, then ingests ``--chunks`` more
chunks of assistant-chat length from this process (``store_many``, 200 messages a call,
the bulk-ingest helpers on as by default) and goes on for ``--after`` seconds. Reported:
the ingest rate; the searches' p50/p95/p99 during the ingest and after it; the chunks
BM25 and the vector index have not published yet (sampled every 0.5 s: median and
max during the ingest), how long after the ingest each is caught up, and when the
helpers have exited (each run waits for them before the next), the most tombstones
(base rows held stale) the searcher's vector index held after the ingest, and the
searcher's own BM25 delta (chunks it tokenised beyond the published generations it
switched to: median and max during the ingest, median after it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _chat import DEFAULT_LOCOMO, ChatCorpus, events
from _common import emit_json, log, machine_info, percentiles_ms, print_table
from _procs import settle

import mindfile

SEARCHER = r"""
import json, sys, time
from pathlib import Path
import mindfile
path, index, stop, queries = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]
qs = json.loads(Path(queries).read_text())
folder = Path(path + ".index")

def published(kind):
    try:
        return int(json.loads((folder / kind / "manifest.json").read_text())["max_id"])
    except (OSError, ValueError, KeyError):
        return 0

eng = mindfile.open(path, vector_index=index)
kind = index if index in ("zvec", "lancedb") else "exact"
lat, lags, i, sample_at = [], [], 0, 0.0
print("ready", flush=True)
while not stop.exists():
    q = qs[i % len(qs)]
    i += 1
    s = time.perf_counter()
    eng.search(q)
    lat.append((time.time(), (time.perf_counter() - s) * 1000))
    if time.time() >= sample_at:
        sample_at = time.time() + 0.5
        high = int(eng.db.scalar("SELECT coalesce(max(id), 0) FROM chunks"))
        held = eng.index.stats().get("tombstones", 0)
        delta = eng.lexical.stats()["delta_docs"] if eng.lexical is not None else 0
        lags.append(
            (time.time(), high - published("bm25"), high - published(kind), held, delta)
        )
eng.close()
print(json.dumps({"lat": lat, "lags": lags}))
"""

SESSIONS = 1000


def build(path: Path, chunks: int, index: str, corpus: ChatCorpus) -> None:
    """A store of ``chunks`` chunks with its indexes published."""
    with mindfile.open(path, vector_index=index) as eng:
        messages = corpus.messages()
        done = total = 0
        while total < chunks:
            texts = [next(messages) for _ in range(200)]
            total += eng.store_many(events(texts, done, SESSIONS))
            done += len(texts)
        settle(eng)
        eng.index.rebuild()
        settle(eng)
    log(f"built {total:,} chunks at {path}")


def copy_store(src: Path, dst_dir: Path, index: str) -> Path:
    """A copy of the store file and of its ``.index`` folder (without lock files, and
    without the folders of other vector indexes)."""
    shutil.rmtree(dst_dir, ignore_errors=True)
    dst_dir.mkdir(parents=True)
    for suffix in ("", "-wal", "-shm"):
        f = Path(f"{src}{suffix}")
        if f.exists():
            shutil.copy2(f, dst_dir / f"store.db{suffix}")
    idx = Path(f"{src}.index")
    others = {"exact", "zvec", "lancedb"} - {index}

    def skip(folder: str, names: list[str]) -> set[str]:
        top = Path(folder) == idx
        return {n for n in names if n.endswith(".lock") or (top and n in others)}

    if idx.is_dir():
        shutil.copytree(idx, dst_dir / "store.db.index", ignore=skip)
    return dst_dir / "store.db"


def caught_up_after(lags: list[tuple[float, ...]], end: float, col: int) -> float | None:
    """Seconds after ``end`` from which every sample shows no lag (None: never)."""
    after = [(t, lag[col]) for t, *lag in lags if t > end]
    last_behind = max((t for t, lag in after if lag > 0), default=None)
    if after and after[-1][1] > 0:
        return None
    return 0.0 if last_behind is None else last_behind - end


def run(src: Path, work: Path, args: argparse.Namespace, corpus: ChatCorpus) -> dict[str, Any]:
    path = copy_store(src, work, args.index)
    stop = work / "stop"
    queries = work / "queries.json"
    queries.write_text(json.dumps(corpus.queries(3000, 4000)))
    searcher = subprocess.Popen(
        [sys.executable, "-c", SEARCHER, str(path), args.index, str(stop), str(queries)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert searcher.stdout is not None
    searcher.stdout.readline()  # ready
    time.sleep(2)
    eng = mindfile.open(path, vector_index=args.index)
    done = int(eng.db.scalar("SELECT count(*) FROM conversation_events"))
    messages = corpus.messages()
    chunks = 0
    start = time.time()
    while chunks < args.chunks:
        texts = [next(messages) for _ in range(200)]
        chunks += eng.store_many(events(texts, done, SESSIONS))
        done += len(texts)
    end = time.time()
    time.sleep(args.after)
    stop.touch()
    out = json.loads(searcher.communicate(timeout=120)[0].splitlines()[-1])
    # The helpers finish (and exit) before the next run starts: a merge left running
    # would share the cores with it.
    if eng._publisher is not None:
        eng._publisher.wait(1800)
    helpers_done = time.time() - end
    eng.close()
    lat, lags = out["lat"], [tuple(x) for x in out["lags"]]
    during = [ms for t, ms in lat if start <= t <= end]
    after = [ms for t, ms in lat if t > end]
    lex = [b for t, b, _, _, _ in lags if start <= t <= end]
    vec = [v for t, _, v, _, _ in lags if start <= t <= end]
    tombstones = [int(h) for t, _, _, h, _ in lags if t > end]
    # The searching process's own BM25 delta: what it tokenised beyond the published
    # generations it switched to (large when it lags behind the helper's publishes).
    own = [d for t, _, _, _, d in lags if start <= t <= end]
    own_after = [d for t, _, _, _, d in lags if t > end]
    p_during, p_after = percentiles_ms(during), percentiles_ms(after)
    return {
        "chunks_per_s": chunks / (end - start),
        "during_p50": p_during["p50_ms"],
        "during_p95": p_during["p95_ms"],
        "during_p99": p_during["p99_ms"],
        "after_p50": p_after["p50_ms"],
        "after_p95": p_after["p95_ms"],
        "after_p99": p_after["p99_ms"],
        "bm25_lag_median": statistics.median(lex) if lex else None,
        "bm25_lag_max": max(lex) if lex else None,
        "vector_lag_median": statistics.median(vec) if vec else None,
        "vector_lag_max": max(vec) if vec else None,
        "bm25_caught_up_s": caught_up_after(lags, end, 0),
        "vector_caught_up_s": caught_up_after(lags, end, 1),
        "tombstones_after_max": max(tombstones, default=None),
        "bm25_delta_median": statistics.median(own) if own else None,
        "bm25_delta_max": max(own, default=None),
        "bm25_delta_after_median": statistics.median(own_after) if own_after else None,
        "helpers_done_s": helpers_done,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="the store to grow (copied for each run)")
    parser.add_argument("--base", type=int, default=117_000, help="chunks, without --store")
    parser.add_argument("--index", default="zvec", help="vector_index of every process")
    parser.add_argument("--chunks", type=int, default=80_000, help="chunks the ingest adds")
    parser.add_argument("--after", type=float, default=15.0, help="seconds after the ingest")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    corpus = ChatCorpus(args.locomo)
    with tempfile.TemporaryDirectory(prefix="mindfile-grow-") as tmp:
        src = args.store
        if src is None:
            src = Path(tmp) / "base" / "store.db"
            src.parent.mkdir()
            build(src, args.base, args.index, corpus)
        runs = []
        for rep in range(args.repeats):
            runs.append(run(src, Path(tmp) / "run", args, corpus))
            log(f"run {rep + 1}: {runs[-1]}")
    columns = list(runs[0])
    if args.json:
        emit_json({"machine": machine_info(), "args": vars(args), "runs": runs})
    else:
        rows = [{"run": i + 1, **r} for i, r in enumerate(runs)]
        print_table(
            rows,
            ["run", *columns],
            f"Growing a store ({args.index}) by {args.chunks:,} chunks beside a searching "
            "process (ms; lags in chunks; caught up: seconds after the ingest)",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
