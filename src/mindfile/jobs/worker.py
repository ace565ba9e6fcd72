"""Workers: :func:`run_jobs` (one synchronous pass) and :class:`IndexWorker` (threads).

A pass repeatedly claims a batch of due jobs, embeds the chunk texts outside any
transaction (so a slow embedder never holds the write lock), then writes the vectors
and marks the jobs done in one short transaction. An embedder failure reschedules the
batch with exponential backoff (or dead-letters it); nothing is lost either way.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields
from types import TracebackType
from typing import TYPE_CHECKING

from mindfile.embed.base import Vectors
from mindfile.errors import ConfigError, EmbeddingError, InvalidInputError, MindfileError
from mindfile.index.embedding import embed_documents
from mindfile.jobs import queue
from mindfile.jobs.types import Clock, JobPolicy, JobReport

if TYPE_CHECKING:
    from mindfile._deps import EmbedDeps

__all__ = ["IndexWorker", "run_jobs"]

log = logging.getLogger("mindfile.jobs")

MAX_BATCH_SIZE = 1024


@dataclass(slots=True)
class _Tally:
    claimed: int = 0
    succeeded: int = 0
    retried: int = 0
    dead_lettered: int = 0
    discarded: int = 0
    recovered: int = 0
    batches: int = 0
    stopped_early: bool = False
    last_error: str | None = None

    def add(self, report: JobReport) -> None:
        for f in fields(JobReport):
            if f.name in ("stopped_early", "last_error"):
                continue
            setattr(self, f.name, getattr(self, f.name) + getattr(report, f.name))
        self.last_error = report.last_error or self.last_error

    def report(self) -> JobReport:
        return JobReport(**{f.name: getattr(self, f.name) for f in fields(JobReport)})


def _check_sizes(max_jobs: int | None, batch_size: int) -> None:
    if max_jobs is not None and (
        isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 0
    ):
        raise InvalidInputError("max_jobs must be a non-negative integer or None")
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or not 1 <= batch_size <= MAX_BATCH_SIZE
    ):
        raise InvalidInputError(f"batch_size must be an integer from 1 to {MAX_BATCH_SIZE}")


def _embed(engine: EmbedDeps, texts: list[str]) -> Vectors:
    return embed_documents(engine.embedder, engine.db, texts)


def run_jobs(
    engine: EmbedDeps,
    *,
    max_jobs: int | None = None,
    batch_size: int = 64,
    policy: JobPolicy | None = None,
    clock: Clock | None = None,
    worker_id: str | None = None,
    rng: Callable[[], float] = random.random,
) -> JobReport:
    """Process the jobs that are due now, synchronously, and report what happened.

    Claims at most ``max_jobs`` jobs (``None``: until nothing is due), ``batch_size`` per
    embedder call. Failed batches are rescheduled per ``policy``; after
    ``policy.stop_after_failures`` failed batches in a row the pass stops early. Safe to
    run from several threads or processes at once (claims are leases).
    """
    _check_sizes(max_jobs, batch_size)
    policy = policy or JobPolicy()
    clock = clock or queue.utc_clock
    worker = worker_id or queue.default_worker_id()
    tally = _Tally()
    failures_in_row = 0
    while max_jobs is None or tally.claimed < max_jobs:
        limit = batch_size if max_jobs is None else min(batch_size, max_jobs - tally.claimed)
        batch = queue.claim(
            engine.stores.jobs, now=clock(), limit=limit, worker=worker, policy=policy
        )
        tally.recovered += batch.recovered
        tally.dead_lettered += batch.recovered_dead
        if not batch.jobs:
            break
        tally.claimed += len(batch.jobs)
        tally.batches += 1
        try:
            vectors = _embed(engine, [job.text for job in batch.jobs])
        except EmbeddingError as exc:
            retried, dead, discarded = queue.fail(
                engine.stores.jobs,
                batch,
                exc.message,
                clock(),
                policy,
                rng() if policy.jitter else 0.0,
            )
            tally.retried += retried
            tally.dead_lettered += dead
            tally.discarded += discarded
            tally.last_error = exc.message
            log.warning("embedding %d job(s) failed: %s", len(batch.jobs), exc.message)
            failures_in_row += 1
            if failures_in_row >= policy.stop_after_failures:
                tally.stopped_early = True
                break
            continue
        except BaseException:
            # Interrupted (KeyboardInterrupt, SystemExit): hand the jobs back untouched.
            with contextlib.suppress(MindfileError):  # else the lease expires instead
                queue.release(engine.stores.jobs, batch, clock())
            raise
        failures_in_row = 0
        succeeded, discarded = queue.complete(
            engine.stores.jobs, batch, vectors, engine.embedder.model_id, clock()
        )
        tally.succeeded += succeeded
        tally.discarded += discarded
    return tally.report()


class IndexWorker:
    """Background threads that keep running :func:`run_jobs` on one engine.

    ``concurrency`` threads each claim and embed their own batch, so at most
    ``concurrency`` embedder calls run at once; SQLite statements are serialised by the
    engine's connection lock and every transaction is short. An idle thread sleeps
    ``poll_interval`` seconds (or until :meth:`notify`). Use as a context manager, or
    call :meth:`start` and :meth:`stop`; stop the worker before closing the engine.
    """

    def __init__(
        self,
        engine: EmbedDeps,
        *,
        concurrency: int = 2,
        batch_size: int = 64,
        poll_interval: float = 0.5,
        policy: JobPolicy | None = None,
        clock: Clock | None = None,
        name: str = "mindfile-index",
    ) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError("concurrency must be a positive integer")
        if not isinstance(poll_interval, int | float) or poll_interval <= 0:
            raise ConfigError("poll_interval must be a positive number of seconds")
        _check_sizes(None, batch_size)
        self.engine = engine
        self.concurrency = concurrency
        self.batch_size = batch_size
        self.poll_interval = float(poll_interval)
        self.policy = policy or JobPolicy()
        self.clock = clock
        self.name = name
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._tally = _Tally()
        self._threads: list[threading.Thread] = []

    @property
    def running(self) -> bool:
        """Whether any worker thread is alive."""
        return any(t.is_alive() for t in self._threads)

    def report(self) -> JobReport:
        """Totals over every pass since :meth:`start`."""
        with self._lock:
            return self._tally.report()

    def start(self) -> IndexWorker:
        """Start the threads (no-op if running)."""
        if self.running:
            return self
        self._stop.clear()
        self._threads = [
            threading.Thread(target=self._loop, args=(i,), name=f"{self.name}-{i}", daemon=True)
            for i in range(self.concurrency)
        ]
        for thread in self._threads:
            thread.start()
        return self

    def notify(self) -> None:
        """Wake idle threads now (e.g. right after storing in background mode)."""
        self._wake.set()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Ask the threads to finish their current batch, and wait for them.

        The queue is not drained: jobs not yet claimed stay queued for the next worker
        or :func:`run_jobs` pass.
        """
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout)

    def _loop(self, index: int) -> None:
        worker = f"{queue.default_worker_id()}:{self.name}-{index}"
        while not self._stop.is_set() and not self.engine.db.closed:
            idle = True
            try:
                report = run_jobs(
                    self.engine,
                    max_jobs=self.batch_size,
                    batch_size=self.batch_size,
                    policy=self.policy,
                    clock=self.clock,
                    worker_id=worker,
                )
                with self._lock:
                    self._tally.add(report)
                idle = report.succeeded == 0
            except MindfileError as exc:  # e.g. the database stayed locked: try again later
                log.warning("index worker %s: %s", worker, exc.message)
                with self._lock:
                    self._tally.last_error = exc.message
            if idle:
                self._wake.wait(self.poll_interval)
                self._wake.clear()

    def __enter__(self) -> IndexWorker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
