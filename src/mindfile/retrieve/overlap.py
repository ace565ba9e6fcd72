"""One side thread per process that runs a search's BM25 leg while its vector leg runs.

The two legs of a hybrid search are independent. At ~100k chunks each costs
milliseconds (the vector leg ~3 ms, BM25 ~1.5 ms at 117k), and most of the vector
leg's time is numpy work that releases the GIL, so running BM25 on another thread
meanwhile cuts a search's latency by most of the shorter leg on an idle machine
(benchmarks/README.md, "Both legs at once").

Only a search that is alone in its process overlaps its legs (:func:`searching` counts
them): when several threads search at once, the cores already have work, and the
hand-over (GIL switches between the two threads) would only add CPU time, about
0.3 ms a search at 117k. There is one side thread per process, and it takes one task
at a time: :meth:`SideThread.try_start` returns None when it is busy, and the caller
then runs the leg itself. Searches never queue for it. Set
``MINDFILE_SEARCH_OVERLAP=0`` to turn it off.

A forked child starts without the parent's side thread (threads do not survive a fork):
its first search starts a new one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import TypeVar

from mindfile._helpers import turned_off

__all__ = ["SideThread", "alone", "overlap_allowed", "searching", "side_thread"]

T = TypeVar("T")


def overlap_allowed() -> bool:
    """Whether searches may run a leg on the side thread: at least two CPUs, and not
    turned off by ``MINDFILE_SEARCH_OVERLAP`` (``0``, ``false``, ``no``, ``off``)."""
    return not turned_off("MINDFILE_SEARCH_OVERLAP") and (os.cpu_count() or 1) >= 2


_count_lock = threading.Lock()
_in_flight = 0


@contextmanager
def searching() -> Iterator[None]:
    """Count the calling thread's search as in flight while the block runs."""
    global _in_flight
    with _count_lock:
        _in_flight += 1
    try:
        yield
    finally:
        with _count_lock:
            _in_flight -= 1


def alone() -> bool:
    """Whether the calling thread's search is the only one in flight in this process."""
    return _in_flight <= 1


class SideThread:
    """A daemon thread that runs one task at a time, handed over without queueing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._task: tuple[Callable[[], object], Future[object]] | None = None
        self._busy = False
        self._thread: threading.Thread | None = None

    def try_start(self, fn: Callable[[], T]) -> Future[T] | None:
        """Start ``fn()`` on the side thread and return its future, or None when the
        thread is busy (run ``fn`` yourself then)."""
        with self._lock:
            if self._busy:
                return None
            self._busy = True
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="mindfile-search-leg", daemon=True
                )
                self._thread.start()
            future: Future[T] = Future()
            self._task = (fn, future)  # type: ignore[assignment]
            self._wake.notify()
        return future

    def _run(self) -> None:
        while True:
            with self._lock:
                while self._task is None:
                    self._wake.wait()
                fn, future = self._task
                self._task = None
            try:
                result = fn()
            except BaseException as exc:  # handed to the caller, who re-raises it
                with self._lock:
                    self._busy = False
                future.set_exception(exc)
            else:
                with self._lock:
                    self._busy = False
                future.set_result(result)


_SIDE = SideThread()


def _after_fork() -> None:
    """In a forked child: no search in flight, and a side thread not started yet (the
    parent's locks may have been held at the fork)."""
    global _count_lock, _in_flight, _SIDE
    _count_lock, _in_flight = threading.Lock(), 0
    _SIDE = SideThread()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def side_thread() -> SideThread:
    """The process's side thread."""
    return _SIDE
