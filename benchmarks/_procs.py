"""Process helpers for the scale and load benchmarks: memory from /proc, percentiles,
waiting for a store's derived indexes."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from _common import percentiles_ms as pct

__all__ = ["disk_bytes", "memory", "pct", "settle"]


def memory(pid: int | None = None) -> dict[str, float]:
    """RSS, PSS (shared pages split between the processes mapping them), private memory
    (pages no other process maps: a mapped file's pages only this process touched count
    here although they are page cache) and anonymous memory (heap and other memory no
    file backs: what each further process really adds) in MB, from
    ``/proc/PID/smaps_rollup`` (Linux); zeros where unavailable."""
    path = Path(f"/proc/{pid or os.getpid()}/smaps_rollup")
    out = {"rss_mb": 0.0, "pss_mb": 0.0, "private_mb": 0.0, "anon_mb": 0.0}
    try:
        text = path.read_text()
    except OSError:
        return out
    fields: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
            fields[parts[0][:-1]] = int(parts[1])  # kB
    out["rss_mb"] = fields.get("Rss", 0) / 1024
    out["pss_mb"] = fields.get("Pss", 0) / 1024
    out["private_mb"] = (fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)) / 1024
    out["anon_mb"] = fields.get("Anonymous", 0) / 1024
    return out


def disk_bytes(path: Path) -> int:
    """The store file plus its -wal and -shm files."""
    total = 0
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{path}{suffix}")
        if p.exists():
            total += p.stat().st_size
    return total


def settle(eng: Any, timeout: float = 300.0) -> float:
    """Wait until the derived indexes are built (BM25 caught up, the exact index's
    codes installed) and a bulk ingest's helper processes are done (the statement
    flags and word pieces written); returns the seconds waited."""
    t0 = time.perf_counter()
    publisher = getattr(eng, "_publisher", None)
    if publisher is not None:
        publisher.wait(timeout)
    lexical = getattr(eng, "lexical", None)
    if lexical is not None:
        lexical.size()
    eng.index.size()

    def busy() -> bool:
        merging = eng.index.stats().get("merging", False)  # publishing a generation
        bm25 = lexical is not None and (lexical._builder is not None or lexical._merger is not None)
        return bool(getattr(eng.index, "_building", False) or merging or bm25)

    while busy() and time.perf_counter() - t0 < timeout:
        time.sleep(0.02)
    return time.perf_counter() - t0
