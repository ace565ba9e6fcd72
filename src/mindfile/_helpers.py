"""When Mindfile may start helper processes (the embedding worker, the index publisher)."""

from __future__ import annotations

import os
import sys

__all__ = ["helper_processes_allowed"]


def helper_processes_allowed(variable: str) -> bool:
    """Whether a helper process may be started here: not turned off by the environment
    variable ``variable`` (``0``, ``false``, ``no``, ``off``), not a frozen application,
    and at least two CPUs (on one, a helper only competes with its parent)."""
    if os.environ.get(variable, "").strip().lower() in ("0", "false", "no", "off"):
        return False
    if getattr(sys, "frozen", False) or not sys.executable:
        return False
    return (os.cpu_count() or 1) >= 2
