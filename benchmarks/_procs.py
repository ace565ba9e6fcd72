"""Process helpers for the scale and load benchmarks: memory from /proc, percentiles."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["disk_bytes", "memory", "pct"]


def memory(pid: int | None = None) -> dict[str, float]:
    """RSS, PSS (shared pages split between the processes mapping them) and private
    memory in MB, from ``/proc/PID/smaps_rollup`` (Linux); zeros where unavailable."""
    path = Path(f"/proc/{pid or os.getpid()}/smaps_rollup")
    out = {"rss_mb": 0.0, "pss_mb": 0.0, "private_mb": 0.0}
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
    return out


def pct(samples_ms: Sequence[float]) -> dict[str, float | None]:
    """p50/p95/p99/mean/max of millisecond samples (None when there are none)."""
    if not samples_ms:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None, "mean_ms": None, "max_ms": None}
    arr = np.asarray(samples_ms, dtype=np.float64)
    p50, p95, p99 = np.percentile(arr, [50, 95, 99])
    return {
        "p50_ms": float(p50),
        "p95_ms": float(p95),
        "p99_ms": float(p99),
        "mean_ms": float(arr.mean()),
        "max_ms": float(arr.max()),
    }


def disk_bytes(path: Path) -> int:
    """The store file plus its -wal and -shm files."""
    total = 0
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{path}{suffix}")
        if p.exists():
            total += p.stat().st_size
    return total
