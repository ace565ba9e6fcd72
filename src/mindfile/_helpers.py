"""When Mindfile may start helper processes (the embedding worker, the index publisher)."""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = [
    "by_pages",
    "defer_flags_to",
    "flags_deferred",
    "helper_processes_allowed",
    "start_holding",
    "turned_off",
]

_Row = TypeVar("_Row", bound=Sequence[Any])


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


def by_pages(
    read: Callable[[int], Sequence[_Row]],
    write: Callable[[Sequence[_Row]], int | None],
    *,
    pause: float,
    pages: int | None = None,
    stopping: Callable[[], bool] = lambda: False,
) -> int:
    """The backfills' loop (statement flags, token sets): ``read(after)`` the next page
    of rows (``(rowid, ...)``, ascending, after ``after``), ``write(rows)`` what they
    give (how many; None: stopped midway, nothing written), ``pause`` seconds between
    pages, at most ``pages`` pages, until ``stopping()``. Returns how many were written."""
    after = done = page = 0
    while not stopping() and (pages is None or page < pages):
        page += 1
        rows = read(after)
        if not rows:
            break
        written = write(rows)
        if written is None:
            break
        done += written
        after = int(rows[-1][0])
        if pause > 0:
            time.sleep(pause)
    return done


_FLAGS_LOCK = threading.Lock()
_FLAGS_HELPERS: weakref.WeakKeyDictionary[Any, Callable[[], bool]] = weakref.WeakKeyDictionary()


def defer_flags_to(db: Any, check: Callable[[], bool]) -> None:
    """While ``check()`` is true, another process (the bulk ingest's flags helper,
    mindfile._publish) writes ``db``'s statement flags and word pieces: this process
    starts no backfill of either (a thread classifying or tokenising a bulk write here
    took the interpreter from its searches: 117k chunks, p50 ~6 -> 11-16 ms for ~8 s),
    and its searches go without token match for the chunks not reached yet."""
    with _FLAGS_LOCK:
        _FLAGS_HELPERS[db] = check


def flags_deferred(db: Any) -> bool:
    """Whether another process writes ``db``'s flags and word pieces now
    (:func:`defer_flags_to`)."""
    with _FLAGS_LOCK:
        check = _FLAGS_HELPERS.get(db)
    return check is not None and check()


def helper_processes_allowed(variable: str) -> bool:
    """Whether a helper process may be started here: not :func:`turned_off` by
    ``variable``, not a frozen application, and at least two CPUs (on one, a helper
    only competes with its parent)."""
    if turned_off(variable):
        return False
    if getattr(sys, "frozen", False) or not sys.executable:
        return False
    return (os.cpu_count() or 1) >= 2
