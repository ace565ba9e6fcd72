"""When Mindfile may start helper processes (the embedding worker, the index publisher)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["helper_processes_allowed", "start_holding", "turned_off"]


def turned_off(variable: str) -> bool:
    """Whether the environment variable ``variable`` turns a feature off (``0``,
    ``false``, ``no``, ``off``)."""
    return os.environ.get(variable, "").strip().lower() in ("0", "false", "no", "off")


def start_holding(
    lock: threading.Lock, name: str, target: Callable[..., Any], *args: Any
) -> threading.Thread | None:
    """Run ``target(*args)`` in a daemon thread that holds ``lock`` until it ends (a
    background job of which one runs at a time); None, and nothing started, when
    ``lock`` is held already."""
    if not lock.acquire(blocking=False):
        return None

    def run() -> None:
        try:
            target(*args)
        finally:
            lock.release()

    thread = threading.Thread(target=run, name=name, daemon=True)
    try:
        thread.start()
    except BaseException:
        lock.release()
        raise
    return thread


def helper_processes_allowed(variable: str) -> bool:
    """Whether a helper process may be started here: not :func:`turned_off` by
    ``variable``, not a frozen application, and at least two CPUs (on one, a helper
    only competes with its parent)."""
    if turned_off(variable):
        return False
    if getattr(sys, "frozen", False) or not sys.executable:
        return False
    return (os.cpu_count() or 1) >= 2
