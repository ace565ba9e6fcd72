"""Latency and throughput benchmark for Mindfile (a script, not a test).

Measures, on an on-disk store in a temporary directory, with the default embedder (the
bundled static model) and the chosen vector index:

1. bulk ingest through the full pipeline (``store_many`` in batches), messages/s;
2. single ``store`` latency on a warm store;
3. end-to-end ``search`` latency (query embedding included) for hybrid, vector-only and
   full-text-only at each store size, plus search right after a write;
4. cold open: ``mindfile.open`` of the largest store + first search, in a fresh process.

Messages are realistic and deterministic: sentences of LoCoMo turns recombined with a
seeded RNG when the LoCoMo JSON is available (read in place, never copied), otherwise a
seeded template generator. Queries are held-out questions (LoCoMo ``qa[].question`` or
generated ones), never stored text.

Examples::

    python benchmarks/latency.py --quick
    python benchmarks/latency.py                       # sizes 10000,100000, exact index
    python benchmarks/latency.py --all-indexes --json > latency.json
    python benchmarks/latency.py --breakdown           # + per-query split of hybrid search
    python benchmarks/latency.py --open-opt neighbor_context=false   # A/B an open() option

Every search row also gives ``cpu_p50_ms`` (process CPU time, all threads) and the header
the 1-minute load average: on a shared machine wall time moves with the load, CPU time
much less. numpy's BLAS thread count matters here (OPENBLAS_NUM_THREADS is recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import LOCOMO, emit_json, locomo_texts, log, machine_info, percentiles_ms, print_table

import mindfile

DEFAULT_DATA = LOCOMO
INDEXES = ("exact", "sqlite-vec")
MODES = ("hybrid", "vector", "fts")
MAX_MESSAGE_CHARS = 600  # stays one chunk (the default chunk size is 640 characters)
N_SESSIONS = 100
#: Environment variables that change how many threads numpy's BLAS / tokenizers use.
THREAD_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS")

TARGET_INGEST_MSG_S = 3000.0
TARGET_STORE_P50_MS = 3.0
TARGET_HYBRID_P50_MS = 5.0
TARGET_HYBRID_P99_MS = 20.0
TARGET_HYBRID_AT_CHUNKS = 100_000


# -- data --------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


load_locomo = locomo_texts


def locomo_messages(turns: Sequence[str], rng: random.Random) -> Iterator[str]:
    """Unique messages: the real turns (shuffled), then sentences of different turns
    recombined (1-4 sentences each), all at most ``MAX_MESSAGE_CHARS`` characters."""
    seen: set[str] = set()
    order = list(range(len(turns)))
    rng.shuffle(order)
    for i in order:
        text = turns[i]
        if len(text) <= MAX_MESSAGE_CHARS and text not in seen:
            seen.add(text)
            yield text
    sentences = [[s for s in _SENTENCE_END.split(t) if s.strip()] for t in turns]
    sentences = [s for s in sentences if s]
    while True:
        k = rng.choices((1, 2, 3, 4), weights=(2, 4, 3, 1))[0]
        parts = []
        for _ in range(k):
            turn = sentences[rng.randrange(len(sentences))]
            parts.append(turn[rng.randrange(len(turn))])
        text = " ".join(parts)
        if len(text) <= MAX_MESSAGE_CHARS and text not in seen:
            seen.add(text)
            yield text


def _words(text: str, sep: str | None = None) -> tuple[str, ...]:
    return tuple(w.strip() for w in text.split(sep))


_VOCAB: dict[str, tuple[str, ...]] = {
    "name": _words(
        "Alice Ben Carla Dev Elena Farid Grace Hiro Ines Jonas Kemi Liam Maya Noor Oscar "
        "Priya Quinn Rosa Sam Tara Umar Vera Wen Xavier Yara Zoe"
    ),
    "relation": _words(
        "sister brother mom dad cousin grandma grandpa neighbour roommate partner friend "
        "coworker boss aunt uncle"
    ),
    "place": _words(
        "park library museum bakery gym beach market cafe garden studio office station "
        "lake cinema bookstore farm hospital school harbour stadium"
    ),
    "city": _words(
        "Lisbon Kyoto Denver Nairobi Oslo Lima Austin Porto Seoul Dublin Tucson Quebec "
        "Vienna Hanoi Boston Cairo"
    ),
    "adj": _words(
        "quiet crowded beautiful tiny huge old new cozy noisy bright dusty peaceful colorful "
        "famous local hidden modern rustic"
    ),
    "feeling": _words(
        "amazing exhausting relaxing stressful fun inspiring boring wonderful tough "
        "rewarding strange emotional"
    ),
    "hobby": _words(
        "painting hiking pottery running baking climbing gardening knitting cycling "
        "photography swimming chess journaling birdwatching woodworking yoga guitar "
        "volunteering camping"
    ),
    "thing": _words(
        "recipe camera bike notebook guitar painting jacket puzzle plant lamp tent novel "
        "podcast playlist sketch quilt vase kite"
    ),
    "topic": _words(
        "climate change, career changes, mental health, parenting, adoption, space travel, "
        "local history, nutrition, budgeting, ancient Rome, marine biology, jazz, "
        "urban gardening, grief",
        ", ",
    ),
    "time": (
        "yesterday",
        "last weekend",
        "last Tuesday",
        "this morning",
        "two weeks ago",
        "last month",
        "over the summer",
        "on my birthday",
        "after work",
        "during the holidays",
    ),
    "future": (
        "tomorrow",
        "next weekend",
        "next month",
        "in the spring",
        "after the holidays",
        "soon",
    ),
    "month": _words(
        "January February March April May June July August September October November December"
    ),
    "reason": (
        "my doctor suggested it",
        "I needed a break from screens",
        "a friend kept insisting",
        "it helps me sleep better",
        "I wanted to meet new people",
        "work has been so stressful",
        "I saw a documentary about it",
    ),
    "duration": ("a few weeks", "six months", "a year", "two years", "a couple of days"),
}

_TEMPLATES = (
    "I went to the {adj} {place} {time} with my {relation}, and it was {feeling}.",
    "{name} and I tried {hobby} {time}; honestly it was {feeling}.",
    "Have you ever been to {city}? My {relation} says the {place} there is {adj}.",
    "I started {hobby} {duration} ago because {reason}.",
    "We are planning a trip to {city} in {month} to visit my {relation}.",
    "Thanks for the tip about the {thing}, I will try it {future}.",
    "{name} recommended a book about {topic}, so I picked it up at the {place}.",
    "My {relation} gave me a {adj} {thing} {time} and I love it.",
    "Lately I have been reading a lot about {topic}; it is {feeling} to learn.",
    "I finally finished my {thing} project {time}, and {name} helped me a lot.",
    "Do you remember the {adj} {place} in {city}? We should go back {future}.",
    "My {relation} has been into {hobby} since {month}, it is really {feeling} to watch.",
    "I signed up for a {hobby} class at the {place} that starts {future}.",
    "{name} told me about a {adj} {place} near {city} where you can go {hobby}.",
    "It has been {duration} since I last saw {name}, so we are meeting {future}.",
)

_QUESTION_TEMPLATES = (
    "When did {name} go to {city}?",
    "What did {name}'s {relation} give them?",
    "Why did {name} start {hobby}?",
    "Which book did {name} recommend about {topic}?",
    "How long has {name} been doing {hobby}?",
    "Where does {name} want to go {future}?",
    "What does {name} think about {topic}?",
    "Who helped {name} finish the {thing} project?",
    "What class did {name} sign up for at the {place}?",
)


def _fill(template: str, rng: random.Random) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: rng.choice(_VOCAB[m.group(1)]), template)


def synthetic_messages(rng: random.Random) -> Iterator[str]:
    """Unique template messages of 1-3 sentences (the fallback without LoCoMo)."""
    seen: set[str] = set()
    while True:
        k = rng.choices((1, 2, 3), weights=(3, 4, 2))[0]
        text = " ".join(_fill(rng.choice(_TEMPLATES), rng) for _ in range(k))
        if len(text) <= MAX_MESSAGE_CHARS and text not in seen:
            seen.add(text)
            yield text


def synthetic_questions(n: int, rng: random.Random) -> list[str]:
    return [_fill(rng.choice(_QUESTION_TEMPLATES), rng) for _ in range(n)]


class Corpus:
    """Deterministic messages and held-out queries (LoCoMo-derived or synthetic)."""

    def __init__(self, data: Path | None, seed: int) -> None:
        rng = random.Random(seed)
        self.source = "synthetic"
        self.path: str | None = None
        turns: list[str] = []
        questions: list[str] = []
        if data is not None and data.is_file():
            turns, questions = load_locomo(data)
        if turns and questions:
            self.source, self.path = "locomo", str(data)
            self._messages = locomo_messages(turns, random.Random(seed + 1))
        else:
            self._messages = synthetic_messages(random.Random(seed + 1))
            questions = synthetic_questions(2000, random.Random(seed + 2))
        rng.shuffle(questions)
        self.questions = questions
        self.turns = len(turns)
        self.emitted = 0

    def take(self, n: int) -> list[str]:
        out = [next(self._messages) for _ in range(n)]
        self.emitted += n
        return out

    def queries(self, n: int, offset: int = 0) -> list[str]:
        """``n`` questions, cycling if there are fewer (offset picks a different slice)."""
        qs = self.questions
        return [qs[(offset + i) % len(qs)] for i in range(n)]


class EventStream:
    """Messages as events spread over ``N_SESSIONS`` sessions, roles alternating."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self.i = 0

    def events(self, n: int) -> list[tuple[str, int, dict[str, str]]]:
        out = []
        for text in self.corpus.take(n):
            session, seq = f"bench-{self.i % N_SESSIONS:03d}", self.i // N_SESSIONS
            role = "user" if seq % 2 == 0 else "assistant"
            out.append((session, seq, {"role": role, "content": text}))
            self.i += 1
        return out


# -- measuring ---------------------------------------------------------------------------


def pct(samples_ns: Sequence[int]) -> dict[str, float | None]:
    """p50/p95/p99/mean/max in milliseconds of nanosecond samples."""
    return percentiles_ms(np.asarray(samples_ns, dtype=np.float64) / 1e6)


def timed(fn: Callable[[], Any]) -> tuple[int, Any]:
    t0 = time.perf_counter_ns()
    out = fn()
    return time.perf_counter_ns() - t0, out


def status(ok: bool) -> str:
    return "ok" if ok else "MISS"


def ingest(
    eng: mindfile.Mindfile, stream: EventStream, n: int, batch: int
) -> tuple[float, float, int]:
    """Store ``n`` messages with ``store_many`` in batches: (wall seconds, process CPU
    seconds, chunks added)."""
    added = 0
    elapsed = cpu = 0
    for start in range(0, n, batch):
        events = stream.events(min(batch, n - start))  # generated outside the timing
        c0 = time.process_time_ns()
        dt, k = timed(lambda ev=events: eng.store_many(ev))
        cpu += time.process_time_ns() - c0
        elapsed += dt
        added += k
    return elapsed / 1e9, cpu / 1e9, added


def search_latency(
    eng: mindfile.Mindfile, queries: Sequence[str], mode: str
) -> tuple[list[int], list[int], float]:
    """Per-query wall nanoseconds, per-query process CPU nanoseconds (all threads), and
    the mean number of hits. CPU time barely moves when other processes compete for the
    cores, so it tells a slow engine from a busy machine."""
    wall, cpu = [], []
    hits = 0
    for q in queries:
        c0 = time.process_time_ns()
        dt, res = timed(lambda q=q: eng.search(q, mode=mode))
        cpu.append(time.process_time_ns() - c0)
        wall.append(dt)
        hits += len(res)
    return wall, cpu, hits / max(len(queries), 1)


def breakdown(eng: mindfile.Mindfile, queries: Sequence[str], mode: str) -> dict[str, Any]:
    """Per-query split of ``search`` by wrapping the read path's pieces with timers.

    ``fts`` is the BM25 leg, on FTS5 or on the engine's in-memory lexical index.
    Components that a refactor renamed are simply absent; ``other`` is the rest
    (validation, filter building, result objects, Python overhead).
    """
    import mindfile.retrieve.retriever as retriever_mod
    import mindfile.retrieve.search as search_mod

    acc: dict[str, int] = defaultdict(int)
    patched: list[tuple[Any, str, Any, bool]] = []

    def wrap(owner: Any, attr: str, label: str) -> None:
        orig = getattr(owner, attr, None)
        if not callable(orig):
            return

        def timer(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter_ns()
            try:
                return orig(*args, **kwargs)
            finally:
                acc[label] += time.perf_counter_ns() - t0

        had_own = attr in getattr(owner, "__dict__", {})
        try:
            setattr(owner, attr, timer)
        except (AttributeError, TypeError):
            return
        patched.append((owner, attr, orig, had_own))

    wrap(eng.embedder, "embed_query", "embed_query")
    wrap(eng.index, "search", "vector_index")
    wrap(retriever_mod, "fts_search", "fts")
    lexical = getattr(eng, "lexical", None)  # an in-memory BM25 index, where the engine has one
    if lexical is not None:
        wrap(lexical, "search", "fts")
    wrap(search_mod, "weighted_fusion", "fusion")
    wrap(search_mod, "rrf_fusion", "fusion")
    wrap(search_mod, "_hits", "hits")
    labels = ["embed_query", "vector_index", "fts", "fusion", "hits"]
    per: dict[str, list[int]] = {k: [] for k in [*labels, "other", "total"]}
    try:
        for q in queries:
            acc.clear()
            total, _ = timed(lambda q=q: eng.search(q, mode=mode))
            for k in labels:
                per[k].append(acc.get(k, 0))
            per["other"].append(total - sum(acc.values()))
            per["total"].append(total)
    finally:
        for owner, attr, orig, had_own in reversed(patched):
            if had_own or isinstance(owner, type(search_mod)):
                setattr(owner, attr, orig)
            else:
                delattr(owner, attr)
    mean_total = float(np.mean(per["total"])) / 1e6
    rows = []
    for k, v in per.items():
        arr = np.asarray(v, dtype=np.float64) / 1e6
        rows.append(
            {
                "component": k,
                "p50_ms": float(np.percentile(arr, 50)),
                "mean_ms": float(arr.mean()),
                "p99_ms": float(np.percentile(arr, 99)),
                "share_of_mean": float(arr.mean() / mean_total) if mean_total else 0.0,
            }
        )
    return {"mode": mode, "queries": len(queries), "rows": rows}


_COLD_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
import mindfile
t1 = time.perf_counter()
eng = mindfile.open(sys.argv[1], vector_index=sys.argv[2], **json.loads(sys.argv[6]))
t2 = time.perf_counter()
out = {"import_ms": (t1 - t0) * 1e3, "open_ms": (t2 - t1) * 1e3}
if sys.argv[5] == "split":
    eng.embedder.embed_query("warm up")
    t3 = time.perf_counter()
    eng.index.size()
    t4 = time.perf_counter()
    lexical = getattr(eng, "lexical", None)
    if lexical is not None:
        lexical.size()
    t5 = time.perf_counter()
    out["model_load_ms"] = (t3 - t2) * 1e3
    out["index_load_ms"] = (t4 - t3) * 1e3
    out["lexical_load_ms"] = (t5 - t4) * 1e3 if lexical is not None else None
    t2 = t5
eng.search(sys.argv[3])
t6 = time.perf_counter()
eng.search(sys.argv[4])
t7 = time.perf_counter()
out["first_search_ms"] = (t6 - t2) * 1e3
out["second_search_ms"] = (t7 - t6) * 1e3
out["chunks"] = eng.info().chunks
eng.close()
print(json.dumps(out))
"""


def cold_open(
    path: Path, index: str, queries: Sequence[str], repeats: int, opts: dict[str, Any]
) -> dict[str, Any]:
    """Median over ``repeats`` fresh processes of open + first search (end to end), and
    one more process that splits the first search into model load and index load."""

    def run(q1: str, q2: str, variant: str) -> dict[str, float]:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                _COLD_SCRIPT,
                str(path),
                index,
                q1,
                q2,
                variant,
                json.dumps(opts),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        wall = (time.perf_counter() - t0) * 1e3
        if proc.returncode != 0:
            raise RuntimeError(f"cold-open subprocess failed:\n{proc.stderr}")
        out: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
        out["process_wall_ms"] = wall
        return out

    runs = [run(queries[2 * i], queries[2 * i + 1], "plain") for i in range(repeats)]
    split = run(queries[-2], queries[-1], "split")
    keys = ["import_ms", "open_ms", "first_search_ms", "second_search_ms", "process_wall_ms"]
    med = {k: float(np.median([r[k] for r in runs])) for k in keys}
    med["open_plus_first_search_ms"] = float(
        np.median([r["open_ms"] + r["first_search_ms"] for r in runs])
    )
    return {
        "index": index,
        "size": int(runs[0]["chunks"]),
        "repeats": repeats,
        **med,
        "split_open_ms": split["open_ms"],
        "split_model_load_ms": split["model_load_ms"],
        "split_index_load_ms": split["index_load_ms"],
        "split_lexical_load_ms": split.get("lexical_load_ms"),
        "split_first_search_ms": split["first_search_ms"],
    }


def mindfile_source() -> dict[str, Any]:
    """Where ``mindfile`` was imported from and, if that is a git checkout, its state."""
    src = Path(mindfile.__file__).resolve().parent
    out: dict[str, Any] = {"path": str(src), "git_head": None, "git_dirty": None}
    try:
        head = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(src), "status", "--porcelain", "--", "."],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        out["git_head"], out["git_dirty"] = head, bool(dirty)
    except (OSError, subprocess.CalledProcessError):
        pass
    return out


# -- the run -----------------------------------------------------------------------------


def bench_index(
    index: str, sizes: Sequence[int], corpus: Corpus, args: argparse.Namespace, workdir: Path
) -> dict[str, list[dict[str, Any]]]:
    path = workdir / f"latency-{index}.db"
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    stream = EventStream(corpus)
    q_offset = 0
    with mindfile.open(path, vector_index=index, **args.open_opts) as eng:
        log(f"[{index}] store {path} ({eng.embedder.model_id}, {eng.embedder.dimensions}-d)")
        eng.embedder.embed_documents(["load the model before timing"])
        for size in sizes:
            have = eng.info().chunks
            need = size - have
            if need > 0:
                log(f"[{index}] ingest {have:,} -> {size:,} (store_many, batch {args.batch})")
                secs, cpu_secs, added = ingest(eng, stream, need, args.batch)
                rate = need / secs
                out["ingest"].append(
                    {
                        "index": index,
                        "size": size,
                        "from": have,
                        "messages": need,
                        "chunks_added": added,
                        "seconds": secs,
                        "msg_per_s": rate,
                        "cpu_s": cpu_secs,
                        "target": f">= {TARGET_INGEST_MSG_S:.0f}/s",
                        "status": status(rate >= TARGET_INGEST_MSG_S),
                    }
                )
                log(f"[{index}]   {secs:.1f} s, {rate:,.0f} msg/s")
            chunks = eng.info().chunks
            queries = corpus.queries(args.queries, q_offset)
            warm = corpus.queries(args.warmup, q_offset + args.queries)
            q_offset += args.queries + args.warmup
            # The first search after the ingest catches the index up (loads / fills it).
            first_ns, _ = timed(lambda q=warm[0]: eng.search(q))
            # Meanwhile the in-memory BM25 index catches up in a background thread (the
            # first search ranks with FTS5); time it, and let it finish before measuring.
            lexical = getattr(eng, "lexical", None)
            catch_up_ns = timed(lexical.size)[0] if lexical is not None else None
            out["warmup"].append(
                {
                    "index": index,
                    "size": chunks,
                    "first_search_ms": first_ns / 1e6,
                    "bm25_catch_up_ms": None if catch_up_ns is None else catch_up_ns / 1e6,
                }
            )
            for mode in MODES:
                for q in warm:
                    eng.search(q, mode=mode)
            for mode in MODES:
                log(f"[{index}] search {mode} x{len(queries)} at {chunks:,} chunks")
                samples, cpu, mean_hits = search_latency(eng, queries, mode)
                row: dict[str, Any] = {
                    "index": index,
                    "size": chunks,
                    "mode": mode,
                    "n": len(samples),
                    **pct(samples),
                    "cpu_p50_ms": float(np.median(cpu)) / 1e6,
                    "mean_hits": mean_hits,
                    "target": None,
                    "status": None,
                }
                if mode == "hybrid":
                    row["target"] = (
                        f"p50<={TARGET_HYBRID_P50_MS:g} p99<={TARGET_HYBRID_P99_MS:g}"
                        f" @{TARGET_HYBRID_AT_CHUNKS // 1000}k"
                    )
                    row["status"] = status(
                        row["p50_ms"] <= TARGET_HYBRID_P50_MS
                        and row["p99_ms"] <= TARGET_HYBRID_P99_MS
                    )
                out["search"].append(row)
            if args.breakdown and size == sizes[-1]:
                log(f"[{index}] breakdown of hybrid search at {chunks:,} chunks")
                bd = breakdown(eng, queries, "hybrid")
                for r in bd["rows"]:
                    out["breakdown"].append({"index": index, "size": chunks, **r})
            # Single store calls on the warm store (embedding + write transaction).
            log(f"[{index}] single store x{args.single} at {chunks:,} chunks")
            samples, cpu = [], []
            for session, seq, payload in stream.events(args.single):
                c0 = time.process_time_ns()
                dt, _ = timed(lambda s=session, n=seq, p=payload: eng.store(s, n, p))
                cpu.append(time.process_time_ns() - c0)
                samples.append(dt)
            p = pct(samples)
            p["cpu_p50_ms"] = float(np.median(cpu)) / 1e6
            out["single_store"].append(
                {
                    "index": index,
                    "size": chunks,
                    "n": len(samples),
                    **p,
                    "target": f"p50<={TARGET_STORE_P50_MS:g}",
                    "status": status(p["p50_ms"] <= TARGET_STORE_P50_MS),
                }
            )
            # An agent loop: store a turn, then search (the index catches up each time).
            if args.interleaved:
                log(f"[{index}] store+search x{args.interleaved}")
                store_ns, search_ns = [], []
                iq = corpus.queries(args.interleaved, q_offset)
                q_offset += args.interleaved
                for (session, seq, payload), q in zip(
                    stream.events(args.interleaved), iq, strict=True
                ):
                    dt, _ = timed(lambda s=session, n=seq, p=payload: eng.store(s, n, p))
                    store_ns.append(dt)
                    dt, _ = timed(lambda q=q: eng.search(q))
                    search_ns.append(dt)
                out["search"].append(
                    {
                        "index": index,
                        "size": eng.info().chunks,
                        "mode": "hybrid after store",
                        "n": len(search_ns),
                        **pct(search_ns),
                        "cpu_p50_ms": None,
                        "mean_hits": None,
                        "target": None,
                        "status": None,
                    }
                )
        info = eng.info()
        log(f"[{index}] final store: {info.chunks:,} chunks, {info.size_bytes / 1e6:.0f} MB")
    if args.cold_repeats > 0:
        log(f"[{index}] cold open x{args.cold_repeats} (+1 split) in fresh processes")
        cq = corpus.queries(2 * args.cold_repeats + 2, q_offset)
        try:
            out["cold_open"].append(cold_open(path, index, cq, args.cold_repeats, args.open_opts))
        except RuntimeError as exc:  # e.g. the engine changed on disk since the build
            log(f"[{index}] cold open FAILED, skipped: {exc}")
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=None, help="store sizes in chunks (default 10000,100000)")
    p.add_argument("--index", choices=INDEXES, default="exact", help="vector index")
    p.add_argument("--all-indexes", action="store_true", help="run every index for comparison")
    p.add_argument("--queries", type=int, default=None, help="timed queries per mode (300)")
    p.add_argument("--warmup", type=int, default=20, help="untimed warm-up queries per mode")
    p.add_argument("--single", type=int, default=None, help="single store calls (500)")
    p.add_argument("--interleaved", type=int, default=None, help="store+search pairs (100)")
    p.add_argument("--batch", type=int, default=500, help="events per store_many call")
    p.add_argument("--cold-repeats", type=int, default=3, help="cold-open processes (0: skip)")
    p.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help="LoCoMo JSON to draw text from (read in place; falls back to templates)",
    )
    p.add_argument("--synthetic", action="store_true", help="ignore --data, use templates")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--workdir", type=Path, default=None, help="keep the stores here")
    p.add_argument("--breakdown", action="store_true", help="split hybrid search per component")
    p.add_argument(
        "--open-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra mindfile.open() keyword (VALUE parsed as JSON, else a string); repeatable",
    )
    p.add_argument("--quick", action="store_true", help="sizes 2000,10000 and fewer calls")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    args = p.parse_args(argv)
    quick = args.quick
    if args.sizes is None:
        args.sizes = "2000,10000" if quick else "10000,100000"
    args.queries = args.queries if args.queries is not None else (100 if quick else 300)
    args.single = args.single if args.single is not None else (200 if quick else 500)
    if args.interleaved is None:
        args.interleaved = 30 if quick else 100
    sizes = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()})
    if not sizes or sizes[0] <= 0:
        p.error("--sizes needs positive integers")
    args.size_list = sizes
    if args.synthetic:
        args.data = None
    args.open_opts = {}
    for item in args.open_opt:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            p.error(f"--open-opt needs KEY=VALUE, not {item!r}")
        try:
            args.open_opts[key.strip()] = json.loads(raw)
        except ValueError:
            args.open_opts[key.strip()] = raw
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    indexes = list(INDEXES) if args.all_indexes else [args.index]
    t_start = time.perf_counter()
    load_before = os.getloadavg()[0]
    corpus = Corpus(args.data, args.seed)
    log(
        f"data: {corpus.source}"
        + (
            f" ({corpus.path}: {corpus.turns} turns, {len(corpus.questions)} questions)"
            if corpus.path
            else ""
        )
    )
    results: dict[str, list[dict[str, Any]]] = defaultdict(list)
    sample_lengths: list[int] = []
    with tempfile.TemporaryDirectory(prefix="mindfile-latency-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for index in indexes:
            # Each index gets its own store built from the same deterministic stream.
            run_corpus = Corpus(args.data, args.seed)
            part = bench_index(index, args.size_list, run_corpus, args, workdir)
            for key, rows in part.items():
                results[key].extend(rows)
        sample_lengths = [len(t) for t in corpus.take(2000)]
    elapsed = time.perf_counter() - t_start

    report: dict[str, Any] = {
        "benchmark": "mindfile-latency",
        "machine": machine_info(),
        "mindfile_source": mindfile_source(),
        "environment": {
            "load_avg_1m_before": load_before,
            "load_avg_1m_after": os.getloadavg()[0],
            **{k: os.environ.get(k) for k in THREAD_ENV},
        },
        "config": {
            "sizes": args.size_list,
            "indexes": indexes,
            "embedder": "default (bundled static model)",
            "queries_per_mode": args.queries,
            "warmup_per_mode": args.warmup,
            "single_store_calls": args.single,
            "interleaved": args.interleaved,
            "batch": args.batch,
            "sessions": N_SESSIONS,
            "seed": args.seed,
            "quick": args.quick,
            "open_options": args.open_opts,
        },
        "data": {
            "source": corpus.source,
            "path": corpus.path,
            "locomo_turns": corpus.turns,
            "question_pool": len(corpus.questions),
            "message_chars_mean": float(np.mean(sample_lengths)),
            "message_chars_max": int(np.max(sample_lengths)),
        },
        "targets": {
            "hybrid_p50_ms": TARGET_HYBRID_P50_MS,
            "hybrid_p99_ms": TARGET_HYBRID_P99_MS,
            "hybrid_at_chunks": TARGET_HYBRID_AT_CHUNKS,
            "ingest_msg_per_s": TARGET_INGEST_MSG_S,
            "single_store_p50_ms": TARGET_STORE_P50_MS,
        },
        **{
            k: results.get(k, [])
            for k in ("ingest", "single_store", "warmup", "search", "cold_open", "breakdown")
        },
        "elapsed_s": elapsed,
    }
    out = sys.stderr if args.json else sys.stdout
    print_tables(report, out)
    if args.json:
        emit_json(report)
    return 0


def print_tables(report: dict[str, Any], out: Any) -> None:
    m, d, e = report["machine"], report["data"], report["environment"]
    src, opts = report["mindfile_source"], report["config"]["open_options"]
    threads = " ".join(f"{k}={e[k]}" for k in THREAD_ENV if e.get(k) is not None)
    print(
        f"Mindfile latency benchmark - {m['platform']}, {m['cpu_count']} CPUs, "
        f"Python {m['python']}, numpy {m['numpy']}, SQLite {m['sqlite']}\n"
        f"data: {d['source']}, messages mean {d['message_chars_mean']:.0f} chars "
        f"(max {d['message_chars_max']}), {report['config']['sessions']} sessions; "
        f"run took {report['elapsed_s']:.0f} s\n"
        f"load avg (1 min) before {e['load_avg_1m_before']:.2f}, "
        f"after {e['load_avg_1m_after']:.2f}; "
        f"thread env: {threads or 'unset'}\n"
        f"mindfile from {src['path']} (git {src['git_head'] or '?'}"
        f"{', uncommitted changes' if src['git_dirty'] else ''})"
        f"{'; mindfile.open options ' + json.dumps(opts) if opts else ''}",
        file=out,
    )
    print_table(
        report["ingest"],
        ["index", "from", "size", "messages", "seconds", "cpu_s", "msg_per_s", "target", "status"],
        "Bulk ingest (store_many, full pipeline incl. embedding)",
        file=out,
    )
    print_table(
        report["single_store"],
        [
            "index",
            "size",
            "n",
            "p50_ms",
            "p95_ms",
            "p99_ms",
            "mean_ms",
            "cpu_p50_ms",
            "target",
            "status",
        ],
        "Single store() latency on a warm store",
        file=out,
    )
    print_table(
        report["warmup"],
        ["index", "size", "first_search_ms", "bm25_catch_up_ms"],
        "First search after ingest (index catch-up)",
        file=out,
    )
    print_table(
        report["search"],
        [
            "index",
            "size",
            "mode",
            "n",
            "p50_ms",
            "p95_ms",
            "p99_ms",
            "mean_ms",
            "max_ms",
            "cpu_p50_ms",
            "mean_hits",
            "target",
            "status",
        ],
        "Search latency, end to end (query embedding included, top_k=10)",
        file=out,
    )
    if report["cold_open"]:
        print_table(
            report["cold_open"],
            [
                "index",
                "size",
                "import_ms",
                "open_ms",
                "first_search_ms",
                "open_plus_first_search_ms",
                "second_search_ms",
                "process_wall_ms",
            ],
            "Cold open in a fresh process (median; OS page cache warm)",
            file=out,
        )
        print_table(
            report["cold_open"],
            [
                "index",
                "size",
                "split_open_ms",
                "split_model_load_ms",
                "split_index_load_ms",
                "split_lexical_load_ms",
                "split_first_search_ms",
            ],
            "Cold open split (one process): open, model load, vector index load, in-memory"
            " BM25 index load (if any), then first search",
            file=out,
        )
    if report["breakdown"]:
        print_table(
            report["breakdown"],
            ["index", "size", "component", "p50_ms", "mean_ms", "p99_ms", "share_of_mean"],
            "Hybrid search split per query (timers around the read path's pieces)",
            file=out,
        )


if __name__ == "__main__":
    sys.exit(main())
