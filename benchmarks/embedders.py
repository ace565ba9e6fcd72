"""Embedding speed of the local embedders on realistic chat chunks.

    python benchmarks/embedders.py [--embedders static,onnx:minilm] [--texts 256] [--json]

Texts are ~640-character chunks (Mindfile's chunk size) of synthetic ~1,000-character
chat messages; documents are embedded in batches of 64, queries one by one. Quality is
``benchmarks/locomo.py --embedder SPEC``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from _common import chat_text, emit_json, machine_info, print_table

from mindfile.embed import resolve_embedder


def measure(spec: str, texts: list[str], queries: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    embedder = resolve_embedder(spec)
    embedder.embed_query("warm up")
    load = time.perf_counter() - started
    batches = []
    for i in range(0, len(texts), 64):
        t = time.perf_counter()
        embedder.embed_documents(texts[i : i + 64])
        batches.append(time.perf_counter() - t)
    per_query = []
    for q in queries:
        t = time.perf_counter()
        embedder.embed_query(q)
        per_query.append((time.perf_counter() - t) * 1000)
    return {
        "embedder": spec,
        "model_id": embedder.model_id,
        "dims": embedder.dimensions,
        "load_s": load,
        "docs_per_s": len(texts) / sum(batches),
        "query_p50_ms": statistics.median(per_query),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedders", default="static,onnx:minilm")
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(3)
    texts = [chat_text(rng)[:640] for _ in range(args.texts)]
    queries = [" ".join(chat_text(rng).split()[:8]) for _ in range(50)]
    rows = [measure(spec, texts, queries) for spec in args.embedders.split(",")]
    if args.json:
        emit_json({"machine": machine_info(), "rows": rows})
        return 0
    print_table(
        rows,
        ["embedder", "model_id", "dims", "load_s", "docs_per_s", "query_p50_ms"],
        f"embedding speed: {len(texts)} chunks of 640 chars, batches of 64",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
