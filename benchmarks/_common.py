"""Shared helpers for the benchmark scripts: aligned text tables, JSON output, machine info."""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

__all__ = ["emit_json", "fmt", "machine_info", "print_table"]


def fmt(value: Any) -> str:
    """A compact cell: ``-`` for None, floats rounded by magnitude, the rest as ``str``."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        mag = abs(value)
        if mag >= 1000:
            return f"{value:,.0f}"
        if mag >= 100:
            return f"{value:.1f}"
        if mag >= 1:
            return f"{value:.2f}"
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    return str(value)


def print_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    title: str,
    *,
    file: TextIO | None = None,
) -> None:
    """Print ``rows`` as a plain aligned table: numbers right-aligned, text left-aligned."""
    out = file if file is not None else sys.stdout
    cells = [[fmt(row.get(col)) for col in columns] for row in rows]
    numeric = [
        all(isinstance(row.get(col), int | float) or row.get(col) is None for row in rows)
        for col in columns
    ]
    widths = [max([len(col), *(len(line[i]) for line in cells)]) for i, col in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    print(f"\n{title}", file=out)
    print("=" * max(len(title), 1), file=out)
    print(line(list(columns)), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for values in cells:
        print(line(values), file=out)
    out.flush()


def _plain(value: Any) -> Any:
    """JSON fallback for numpy scalars/arrays and other odd values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def emit_json(obj: Any, *, file: TextIO | None = None) -> None:
    """Print ``obj`` as one indented JSON document (numpy values converted)."""
    out = file if file is not None else sys.stdout
    print(json.dumps(obj, indent=2, default=_plain), file=out)
    out.flush()


def machine_info() -> dict[str, Any]:
    """CPU count, Python, numpy, SQLite (as bundled by apsw) and platform versions."""
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
    try:
        import numpy

        info["numpy"] = numpy.__version__
    except ImportError:  # pragma: no cover - a core dependency
        info["numpy"] = None
    try:
        import apsw

        info["sqlite"] = apsw.sqlite_lib_version()
        info["apsw"] = apsw.apsw_version()
    except ImportError:  # pragma: no cover - a core dependency
        info["sqlite"] = None
    try:
        from importlib.metadata import version

        info["mindfile"] = version("mindfile")
    except Exception:  # not installed as a distribution
        info["mindfile"] = None
    return info


_VOCABULARY = """
battery review thermal charts slides March quarterly design budget team meeting travel
Lisbon Porto train hiking sister painting recipe garden invoice deadline server deploy
latency memory index search vector token budget summary customer contract renewal
pricing discount weekend concert museum library coffee bread
"""
WORDS = _VOCABULARY.split()


def chat_text(rng: Any, words: int = 170) -> str:
    """A ~1,000-character chat-like message (the length of real assistant chat)."""
    return " ".join(rng.choice(WORDS) for _ in range(words)) + f" {rng.getrandbits(40):x}"
