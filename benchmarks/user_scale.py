"""One user's memory at scale: ``build_context`` and user-filtered ``search`` (a script,
not a test).

An agent serving one user calls ``build_context`` every turn, and a server searches with
``user_id`` (the HTTP API always does). Both filter by the user's sessions, which
``scale.py``'s store (no users) never exercises. This script writes ~1,000-character chat
messages (``_chat.ChatCorpus``: LoCoMo sentences recombined, read in place) for one user
in ``--sessions`` sessions until ``--chunks`` chunks, then times, over held-out LoCoMo
questions asked in a new session of that user:

- ``build_context`` at ``--budget`` tokens, with feedback on (the default) and off,
  alternating per question;
- ``search`` without a filter, with ``user_id``, and with ``user_id`` and ``top_k=50``.

    python benchmarks/user_scale.py [--chunks 117000] [--store S] [--queries 200] [--json]

``--store`` reuses (or creates and keeps) a store; results in benchmarks/README.md
("build_context at 117k chunks").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _chat import DEFAULT_LOCOMO, ChatCorpus
from _common import emit_json, log, machine_info, percentiles_ms, print_table

import mindfile

USER = "user-1"


def ingest(mem: mindfile.Mindfile, corpus: ChatCorpus, chunks: int, sessions: int) -> int:
    """Messages of one user, round-robin over ``sessions`` sessions; returns the chunks."""
    seq: dict[str, int] = {}
    done = n = 0
    while done < chunks:
        batch = []
        for _ in range(200):
            session = f"s{n % sessions}"
            seq[session] = seq.get(session, 0) + 1
            role = "user" if n % 2 == 0 else "assistant"
            batch.append((session, seq[session], {"role": role, "content": corpus.message()}))
            n += 1
        done += mem.store_many(batch, user_id=USER)
    return done


def run(args: argparse.Namespace, path: Path) -> dict[str, Any]:
    corpus = ChatCorpus(args.locomo)
    fresh = not path.exists()
    with mindfile.open(path) as mem:
        if fresh:
            log(f"writing ~{args.chunks:,} chunks for one user into {path}")
            t0 = time.perf_counter()
            chunks = ingest(mem, corpus, args.chunks, args.sessions)
            log(f"  {chunks:,} chunks in {time.perf_counter() - t0:.0f} s; settling")
            time.sleep(args.settle)
        chunks = int(mem.db.query_one("SELECT count(*) FROM chunks")[0])  # type: ignore[index]
        questions = corpus.queries(args.queries + args.warm, 5000)
        warm, timed = questions[: args.warm], questions[args.warm :]
        rows: list[dict[str, Any]] = []
        configs = {
            "feedback on (default)": mindfile.ContextConfig(),
            "feedback off": mindfile.ContextConfig(feedback=False),
        }
        for q in warm:
            mem.build_context("asking", q, token_budget=args.budget, user_id=USER)
        samples: dict[str, list[float]] = {name: [] for name in configs}
        held: list[int] = []
        for q in timed:
            for name, config in configs.items():
                t0 = time.perf_counter()
                ctx = mem.build_context(
                    "asking", q, token_budget=args.budget, user_id=USER, config=config
                )
                samples[name].append((time.perf_counter() - t0) * 1000)
            held.append(sum(1 for i in ctx.items if i.source == "memory"))
        for name, ms in samples.items():
            rows.append({"call": f"build_context({args.budget:,} tokens), {name}", "n": len(ms)})
            rows[-1] |= percentiles_ms(ms)
        searches: dict[str, dict[str, Any]] = {
            "search()": {},
            "search(user_id=...)": {"user_id": USER},
            "search(user_id=..., top_k=50)": {"user_id": USER, "top_k": 50},
        }
        for name, kw in searches.items():
            for q in warm:
                mem.search(q, **kw)
            ms = []
            for q in timed:
                t0 = time.perf_counter()
                mem.search(q, **kw)
                ms.append((time.perf_counter() - t0) * 1000)
            rows.append({"call": name, "n": len(ms)} | percentiles_ms(ms))
    return {
        "chunks": chunks,
        "sessions": args.sessions,
        "budget": args.budget,
        "memories_per_context": sum(held) / max(len(held), 1),
        "rows": rows,
        "machine": machine_info(),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--chunks", type=int, default=117_000, help="chunks to write (new store)")
    p.add_argument("--sessions", type=int, default=1000, help="the user's sessions")
    p.add_argument("--store", type=Path, default=None, help="reuse or keep this store")
    p.add_argument("--queries", type=int, default=200, help="timed questions")
    p.add_argument("--warm", type=int, default=30, help="questions before timing")
    p.add_argument("--budget", type=int, default=2000, help="build_context's token budget")
    p.add_argument("--settle", type=float, default=15.0, help="seconds after the ingest")
    p.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.store is not None:
        report = run(args, args.store)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            report = run(args, Path(tmp) / "user.db")
    if args.json:
        emit_json(report)
        return 0
    print(
        f"{report['chunks']:,} chunks of one user in {report['sessions']:,} sessions; "
        f"{report['memories_per_context']:.1f} memories a context"
    )
    columns = ["call", "n", "p50_ms", "p95_ms", "p99_ms", "mean_ms", "max_ms"]
    print_table(report["rows"], columns, "One user's memory: latency (ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
