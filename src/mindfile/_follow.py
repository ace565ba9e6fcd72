"""Catch the derived indexes up when writes pause, so the first search after a bulk
ingest does not pay for it (docs/architecture.md, "Index lifecycle", step 6).

Nothing is indexed on the write path: a bulk ingest that tokenised and published its
BM25 postings as it went ran ~35% slower on two cores (benchmarks/README.md). Instead,
once at least :data:`MIN_CHUNKS` chunks were written and no write came for
:data:`IDLE_SECONDS`, one background thread per engine catches the vector index up
(which publishes its generation when the delta is large) and starts the BM25 index's
background build. A store that is written to in a steady trickle is never followed:
its searches catch up a few chunks each, as before.

The thread's first start also runs ``prepare`` once: what the first search of the
process would otherwise load itself (the token matcher, the time parser), so a search
right after a bulk ingest does not pay for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["IDLE_SECONDS", "MIN_CHUNKS", "IdleFollower"]

logger = logging.getLogger(__name__)

#: Seconds without a write before the indexes catch up.
IDLE_SECONDS = 1.0
#: Chunks written since the last catch-up below which nothing is done.
MIN_CHUNKS = 2_000


class IdleFollower:
    """Calls ``follow`` in a daemon thread once writes pause (see the module docstring).

    ``wrote`` is cheap (a lock, two assignments) and never blocks on the follow;
    ``close`` stops the thread and waits for a follow in progress to end.
    """

    def __init__(
        self,
        follow: Callable[[], None],
        *,
        idle: float = IDLE_SECONDS,
        min_chunks: int = MIN_CHUNKS,
        prepare: Callable[[], None] | None = None,
    ) -> None:
        self._follow = follow
        self._prepare = prepare
        self._idle = idle
        self._min_chunks = min_chunks
        self._cond = threading.Condition()
        self._pending = 0
        self._last_write = 0.0
        self._thread: threading.Thread | None = None
        self._closed = False
        #: Follows run so far (for tests and ``info()``).
        self.runs = 0

    def wrote(self, chunks: int) -> None:
        """``chunks`` were just committed."""
        if chunks <= 0:
            return
        with self._cond:
            if self._closed:
                return
            self._pending += chunks
            self._last_write = time.monotonic()
            if self._pending >= self._min_chunks and self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="mindfile-follow", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        prepare, self._prepare = self._prepare, None
        if prepare is not None:
            try:
                prepare()
            except Exception:  # the first search loads it then
                logger.warning("preparing the read path failed", exc_info=True)
        while True:
            with self._cond:
                while not self._closed:
                    wait = self._last_write + self._idle - time.monotonic()
                    if wait <= 0:
                        break
                    self._cond.wait(wait)
                if self._closed:
                    self._thread = None
                    return
                self._pending = 0
            try:
                self._follow()
            except Exception:  # the indexes catch up at the next search anyway
                logger.warning("catching the indexes up after writes failed", exc_info=True)
            with self._cond:
                self.runs += 1
                if self._closed or self._pending < self._min_chunks:
                    self._thread = None
                    return

    def close(self, timeout: float = 30.0) -> None:
        """Stop following; wait for a follow in progress (at most ``timeout`` seconds)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
