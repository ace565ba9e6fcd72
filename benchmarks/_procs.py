"""Process helpers for the scale and load benchmarks: memory from /proc, percentiles."""

from __future__ import annotations

import os
from pathlib import Path

from _common import percentiles_ms as pct

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


def disk_bytes(path: Path) -> int:
    """The store file plus its -wal and -shm files."""
    total = 0
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{path}{suffix}")
        if p.exists():
            total += p.stat().st_size
    return total
