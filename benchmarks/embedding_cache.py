"""What the embedding cache saves (provider calls) and costs (lookup time).

    python benchmarks/embedding_cache.py [--data ../shared/data/locomo/locomo10.json]
                                         [--messages 2000] [--quick] [--json]

1. **Provider calls on LoCoMo ingest.** Every conversation of LoCoMo (turns stored as
   they are, dates in the text, like ``benchmarks/locomo.py``) goes into one store
   through a "remote" embedder (the bundled model, declared not local, counting the
   texts it is sent); then conversation 1 is replayed into new sessions. Reported:
   chunk texts written, texts sent to the provider, hit rate, and the replay's calls.
2. **Lookup cost.** ``store_many`` of ~1,000-character chat messages (batches of 50)
   with the bundled model: cache off, cache on with every text new (lookup + insert),
   and cache on with every text cached (lookup only, no embedder call).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from _common import chat_text, emit_json, machine_info, print_table
from locomo import DEFAULT_DATA, load_conversation

import mindfile
from mindfile.embed import StaticEmbedder


class CountingRemote:
    """The bundled model posing as a remote provider (``local`` is False)."""

    def __init__(self) -> None:
        self._inner = StaticEmbedder()
        self.sent = 0
        self.calls = 0

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dimensions(self) -> int:
        return self._inner.dimensions

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.sent += len(texts)
        self.calls += 1
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self._inner.embed_query(text)


def locomo_calls(data: Path, limit: int | None) -> dict[str, Any]:
    convs = json.loads(data.read_text())[:limit]
    remote = CountingRemote()
    with (
        tempfile.TemporaryDirectory() as tmp,
        mindfile.open(Path(tmp) / "m.db", embedder=remote) as mem,
    ):
        turns = sum(
            load_conversation(mem, conv, date_in_text=True, session_prefix=f"c{i}:")
            for i, conv in enumerate(convs)
        )
        chunks = int(mem.db.scalar("SELECT count(*) FROM chunks"))
        sent, stats = remote.sent, mem.embedding_cache_stats()
        replay_turns = load_conversation(mem, convs[0], date_in_text=True, session_prefix="replay:")
        replay_sent = remote.sent - sent
    return {
        "conversations": len(convs),
        "turns": turns,
        "chunks": chunks,
        "sent": sent,
        "hit_rate": stats.hit_rate,
        "replay_turns": replay_turns,
        "replay_sent": replay_sent,
    }


def lookup_cost(messages: int) -> list[dict[str, Any]]:
    rng = random.Random(7)
    texts = [chat_text(rng) for _ in range(messages)]
    batches = [texts[i : i + 50] for i in range(0, len(texts), 50)]
    rows = []
    for label, cache, replay in (
        ("cache off", False, False),
        ("cache on, all new", True, False),
        ("cache on, all cached", True, True),
    ):
        with (
            tempfile.TemporaryDirectory() as tmp,
            mindfile.open(Path(tmp) / "m.db", embedding_cache=cache) as mem,
        ):
            if replay:
                for b, batch in enumerate(batches):
                    mem.store_many([(f"warm{b}", i, x) for i, x in enumerate(batch, 1)])
            times = []
            for b, batch in enumerate(batches):
                t = time.perf_counter()
                mem.store_many([(f"s{b}", i, x) for i, x in enumerate(batch, 1)])
                times.append((time.perf_counter() - t) * 1000)
            chunks = int(mem.db.scalar("SELECT count(*) FROM chunks")) // (2 if replay else 1)
        rows.append(
            {
                "mode": label,
                "batches": len(batches),
                "batch_p50_ms": statistics.median(times),
                "per_chunk_us": statistics.median(times) * 1000 * len(batches) / chunks,
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="2 conversations, 500 messages")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    data = Path(args.data)
    limit = 2 if args.quick else None
    messages = 500 if args.quick else args.messages
    result: dict[str, Any] = {"machine": machine_info()}
    if data.exists():
        result["locomo"] = locomo_calls(data, limit)
    else:
        result["locomo"] = None
        print(f"(LoCoMo data not found at {data}: provider-call figures skipped)")
    result["lookup"] = lookup_cost(messages)
    if args.json:
        emit_json(result)
        return 0
    if result["locomo"]:
        print_table(
            [result["locomo"]],
            ["conversations", "turns", "chunks", "sent", "hit_rate", "replay_turns", "replay_sent"],
            "Provider calls: LoCoMo ingest through a remote-like embedder, then a replay",
        )
    print_table(
        result["lookup"],
        ["mode", "batches", "batch_p50_ms", "per_chunk_us"],
        "store_many(50 x ~1,000-char messages), bundled model",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
