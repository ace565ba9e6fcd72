"""``mindfile demo``: ingest a sample conversation into a file store and search it.

Runs fully offline on the bundled default embedder; prints what was stored and, for a
few questions, the hybrid hits with their score breakdown.
"""

from __future__ import annotations

import json
import time
from importlib import resources
from pathlib import Path
from typing import Any

import mindfile

__all__ = ["load_sample", "run_demo"]


def load_sample() -> dict[str, Any]:
    """The bundled sample conversation (made up for the demo, CC0)."""
    text = resources.files("mindfile").joinpath("data/sample_conversation.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def run_demo(db_path: str | Path, *, echo: Any = print, top_k: int = 3) -> None:
    """Store the sample conversation in ``db_path`` (replacing it) and run searches."""
    path = Path(db_path)
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    sample = load_sample()
    with mindfile.open(path) as mem:
        t0 = time.perf_counter()
        events = [
            (s["session_id"], seq, msg)
            for s in sample["sessions"]
            for seq, msg in enumerate(s["messages"], start=1)
        ]
        chunks = mem.store_many(events)
        took = (time.perf_counter() - t0) * 1000
        info = mem.info()
        echo(
            f"Stored {len(events)} messages in {len(sample['sessions'])} sessions -> "
            f"{chunks} chunks in {took:.0f} ms"
        )
        echo(
            f"Store: {info.path}  model: {info.embedding_model} ({info.dimensions}-d)  "
            f"index: {info.vector_index}"
        )
        for query in sample["queries"]:
            echo("")
            echo(f"? {query}")
            t0 = time.perf_counter()
            hits = mem.search(query, top_k=top_k)
            took = (time.perf_counter() - t0) * 1000
            for rank, hit in enumerate(hits, start=1):
                b = hit.breakdown
                vec = "-" if b.vector is None else f"{b.vector:.2f}"
                fts = "-" if b.fts is None else f"{b.fts:.2f}"
                echo(
                    f"  {rank}. [{hit.score:.2f} | cos {vec} | bm25 {fts}] "
                    f"{hit.session_id}#{hit.sequence_start}: {hit.text[:90]}"
                )
            echo(f"  ({took:.1f} ms)")
