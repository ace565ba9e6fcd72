"""When Mindfile may start helper processes (the embedding worker, the index publisher)."""

from __future__ import annotations

import os
import sys

__all__ = ["helper_processes_allowed", "turned_off"]


def turned_off(variable: str) -> bool:
    """Whether the environment variable ``variable`` turns a feature off (``0``,
    ``false``, ``no``, ``off``)."""
    return os.environ.get(variable, "").strip().lower() in ("0", "false", "no", "off")


def helper_processes_allowed(variable: str) -> bool:
    """Whether a helper process may be started here: not :func:`turned_off` by
    ``variable``, not a frozen application, and at least two CPUs (on one, a helper
    only competes with its parent)."""
    if turned_off(variable):
        return False
    if getattr(sys, "frozen", False) or not sys.executable:
        return False
    return (os.cpu_count() or 1) >= 2
