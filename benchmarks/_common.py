"""Shared helpers for the benchmark scripts: aligned text tables, JSON output, machine info,
percentiles, progress lines, and the LoCoMo data (read in place, never copied)."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "LOCOMO",
    "emit_json",
    "fmt",
    "locomo_texts",
    "log",
    "machine_info",
    "percentiles_ms",
    "print_table",
]

#: ``../shared/data/locomo/locomo10.json`` relative to the repository root.
LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"


def log(msg: str) -> None:
    """A timestamped progress line on stderr (tables and JSON go to stdout)."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def percentiles_ms(samples_ms: Sequence[float]) -> dict[str, float | None]:
    """p50/p95/p99/mean/max of millisecond samples (None when there are none)."""
    import numpy as np

    if not len(samples_ms):
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


def locomo_texts(path: Path) -> tuple[list[str], list[str]]:
    """All dialogue turn texts and all QA questions of a LoCoMo JSON file, whitespace
    collapsed."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    turns: list[str] = []
    questions: list[str] = []
    for sample in data:
        for key, value in (sample.get("conversation") or {}).items():
            if not (key.startswith("session_") and isinstance(value, list)):
                continue
            for turn in value:
                text = turn.get("text") if isinstance(turn, dict) else None
                if isinstance(text, str) and text.strip():
                    turns.append(" ".join(text.split()))
        for qa in sample.get("qa") or ():
            question = qa.get("question") if isinstance(qa, dict) else None
            if isinstance(question, str) and question.strip():
                questions.append(" ".join(question.split()))
    return turns, questions


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
