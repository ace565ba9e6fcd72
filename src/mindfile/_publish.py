"""Publish the derived indexes from a helper process while a bulk ingest runs
(docs/architecture.md, "Index lifecycle", step 6).

A bulk ingest writes chunks and nothing else: tokenising them for BM25 in the writing
process cost ~35% of its throughput (the Python tokeniser holds the GIL the writer
needs; benchmarks/README.md). Left for later, though, the work landed on the first
searches after the ingest: the ingesting process read every new vector back and ranked
with FTS5 for seconds while its BM25 delta was built.

So once a process has written :data:`START_AFTER` chunks without a pause, it starts one
helper process (``python -m mindfile._publish STORE KIND``) that opens the same store
file, reads the committed chunks, and publishes BM25 generations and the vector index's
generations (exact, zvec, lancedb) as they grow, and classifies the new chunks for
preference recall (:func:`mindfile.retrieve.preferences.backfill`), at the lowest CPU
priority, on the machine's other core. The writer never waits for it; when the ingest
ends, the writing process (and any other) finds published generations covering all but
the last chunks and maps them instead of building them. The cost: at 1M chunks the
ingest ran 5-9% slower beside it (its reads keep the WAL from being reset, and exact
generations are rewritten as the base grows; benchmarks/README.md), against a first
search after the ingest of 0.6-7.7 s instead of 16 s.

- The helper reads the database and writes under ``<store>.index/``, taking the same
  build locks as any process that publishes (one publisher at a time per folder); its
  only database writes are the statement flags (short transactions of 2,000 rows).
- While the writes go on, each pass publishes BM25 when due, then the vector index when
  due, then one page each of statement flags and word pieces (token match), so a pass
  returns to BM25 within seconds. When the writes pause (:data:`POLL_SECONDS`) it
  publishes what is new at once, BM25 first and as an L0 generation (the quickest to
  write: until it is out, searches rank the newest chunks with FTS5), then the vector
  index (in a second thread) while it writes the rest of the flags and word pieces;
  after :data:`COMPACT_AFTER` it folds the BM25 L0 generation into the base.
- It exits when no chunk arrived for :data:`IDLE_SECONDS`, when its stdin closes (the
  engine closed, or its process died), or after a failure (logged to stderr, which is
  discarded: the indexes then catch up in the searching process as before).
- ``MINDFILE_PUBLISHER=0`` turns it off; it is off on one-CPU machines, in frozen
  applications, for in-memory, read-only and Postgres stores, and with
  ``lexical_index="fts5"`` and an index that publishes nothing (sqlite-vec).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mindfile._helpers import helper_processes_allowed

if TYPE_CHECKING:
    from mindfile.retrieve.lexical import Bm25Index
    from mindfile.vector.ann import AnnIndex

__all__ = ["IDLE_SECONDS", "START_AFTER", "Publisher", "publisher_allowed", "publisher_for"]

logger = logging.getLogger(__name__)

#: Chunks written by one engine, without a pause of ``IDLE`` seconds, before the helper
#: starts (smaller ingests are caught up at the next search or by the idle follower).
START_AFTER = 20_000
#: The helper exits after this long without a new chunk.
IDLE_SECONDS = 5.0
#: How often the helper looks for new chunks; writes pausing this long (maybe the end
#: of the ingest) publish everything new at once.
POLL_SECONDS = 0.2
#: Writes paused this long (the ingest is over): merge the BM25 L0 into the base.
COMPACT_AFTER = 1.0
#: The helper's niceness where ``SCHED_IDLE`` is missing (it publishes with the CPU the
#: ingest leaves).
NICE = 10


def publisher_allowed() -> bool:
    """Whether helper processes may publish here (environment, CPUs, interpreter)."""
    return helper_processes_allowed("MINDFILE_PUBLISHER")


def publisher_for(
    db: object, path: str, index: object, lexical: Bm25Index | None, *, read_only: bool
) -> Publisher | None:
    """The bulk-ingest publisher of an engine on ``db``, where a helper process can
    publish something (a writable SQLite store file, and a BM25 index or a vector index
    with published generations), else None. While the helper runs, ``lexical`` and
    ``index`` defer their own builds and merges to it (their ``deferred``)."""
    from mindfile.retrieve.preferences import defer_to as defer_statements
    from mindfile.retrieve.token_match import defer_to as defer_token_sets
    from mindfile.storage.db import Database
    from mindfile.vector.ann import AnnIndex

    if read_only or not isinstance(db, Database) or db.in_memory or not publisher_allowed():
        return None
    kind = index.name if isinstance(index, AnnIndex) else None
    if kind is None and lexical is None:
        return None
    publisher = Publisher(path, kind)

    def deferred() -> bool:
        return publisher.running

    if lexical is not None:
        lexical.deferred = deferred  # type: ignore[method-assign]
    defer_token_sets(db, deferred)  # token match's word pieces, too
    defer_statements(db, deferred)  # and the statement flags (preference recall)
    if isinstance(index, AnnIndex):
        index.deferred = deferred  # type: ignore[method-assign]
        publisher.follow = index.follow
    return publisher


class Publisher:
    """The writing engine's handle on its helper process (thread-safe, never blocks a
    writer: :meth:`wrote` is a lock and a few assignments, the start is a ``Popen``)."""

    def __init__(self, path: str, vector_index: str | None, *, start_after: int = START_AFTER):
        self._path = path
        self._vector_index = vector_index
        self._start_after = start_after
        self._lock = threading.Lock()
        self._pending = 0
        self._last_write = 0.0
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = False
        self._pid = os.getpid()
        #: Helpers started so far (for tests and ``info()``).
        self.started = 0
        #: Called after each write while the helper runs (the vector index's
        #: :meth:`~mindfile.vector.ann.AnnIndex.follow`), or None.
        self.follow: Callable[[], None] | None = None

    @property
    def running(self) -> bool:
        proc = self._proc
        return proc is not None and proc.poll() is None

    def wrote(self, chunks: int) -> None:
        """``chunks`` were just committed by this engine. While the helper runs, the
        engine's vector index catches up with them at once (:attr:`follow`)."""
        if chunks <= 0 or os.getpid() != self._pid:
            return
        self._start_if_due(chunks)
        follow = self.follow
        if follow is not None and self.running:
            try:
                follow()
            except Exception as exc:  # the write is committed; the next search catches up
                logger.warning("the vector index could not follow a bulk write: %s", exc)

    def _start_if_due(self, chunks: int) -> None:
        now = time.monotonic()
        with self._lock:
            if self._closed:
                return
            if now - self._last_write > IDLE_SECONDS:
                self._pending = 0  # a pause: the idle follower caught up what came before
            self._last_write = now
            self._pending += chunks
            if self._pending < self._start_after or self.running:
                return
            self._pending = 0
            self._reap()
            argv = [sys.executable, "-m", "mindfile._publish", self._path]
            if self._vector_index is not None:
                argv.append(self._vector_index)
            try:
                self._proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    close_fds=True,
                )
            except OSError as exc:  # no helper: the indexes catch up at the next search
                logger.warning("could not start the index publisher: %s", exc)
                self._closed = True
                return
            self.started += 1

    def _reap(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            _stop(proc, wait=0.0)

    def wait(self, timeout: float) -> bool:
        """Wait until the helper has exited (tests, benchmarks); True if none runs."""
        proc = self._proc
        if proc is None:
            return True
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def close(self, timeout: float = 2.0) -> None:
        """Tell the helper to stop after the generation it is writing (if any)."""
        with self._lock:
            self._closed = True
            proc, self._proc = self._proc, None
        if proc is not None:
            _stop(proc, wait=timeout)


def _stop(proc: subprocess.Popen[bytes], *, wait: float) -> None:
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        # Still writing a generation: it notices the closed stdin between steps and
        # exits by itself; reap it in the background instead of blocking close().
        threading.Thread(target=proc.wait, name="mindfile-publish-reap", daemon=True).start()
    except (OSError, ValueError):
        pass


# -- the helper process ------------------------------------------------------------------


def _parent_gone() -> bool:
    """True once our stdin is closed (the engine closed, or its process ended)."""
    try:
        ready, _, _ = select.select([sys.stdin], [], [], 0)
    except (OSError, ValueError):
        return True
    if not ready:
        return False
    try:
        return os.read(sys.stdin.fileno(), 1) == b""
    except OSError:
        return True


def _yield_cpu() -> None:
    """Run at the lowest CPU priority: ``SCHED_IDLE`` where there is one (Linux: the
    helper runs only when a core would otherwise idle), else niceness :data:`NICE`."""
    idle = getattr(os, "SCHED_IDLE", None)
    if idle is not None:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setscheduler(0, idle, os.sched_param(0))
            return
    with contextlib.suppress(OSError):
        os.nice(NICE)


def _vector_due(index: AnnIndex, high: int, *, final: bool = False) -> bool:
    """Whether the vector index's published base lags enough to publish anew: as far as
    a searching process lets its delta grow, or (``final``, when writes pause) by more
    than a searching process reads back quickly (``min_delta`` rows)."""
    from mindfile.vector.ann_disk import Manifest

    if _parent_gone():
        return False
    manifest = Manifest.load(index.folder / "manifest.json")
    if manifest is None:
        return bool(high >= index.min_delta)
    lag = high - manifest.max_id
    if final:
        return bool(lag >= index.min_delta)
    return bool(lag > max(index.min_delta, int(index.delta_fraction * manifest.count)))


def _token_matcher(db: Any) -> Any:
    """Token match's matcher when the store's embeddings are the bundled model's (whose
    word pieces it stores: mindfile.retrieve.token_match), else None."""
    from mindfile.embed.static import DEFAULT_MODEL_ID, StaticEmbedder
    from mindfile.retrieve.token_match import matcher_for
    from mindfile.storage.meta import MODEL_KEY, SqliteMetaStore

    if SqliteMetaStore(db).get(MODEL_KEY) != DEFAULT_MODEL_ID:
        return None
    return matcher_for(StaticEmbedder(worker=False))


def serve(path: str, vector_index: str | None) -> int:
    """The helper's loop: publish, wait for more chunks, stop when idle or told to."""
    from mindfile.retrieve.lexical import Bm25Index
    from mindfile.retrieve.preferences import backfill
    from mindfile.retrieve.token_match import backfill as backfill_token_sets
    from mindfile.storage.db import Database
    from mindfile.storage.index_source import index_source
    from mindfile.storage.meta import DIMS_KEY, SqliteMetaStore
    from mindfile.vector import make_index
    from mindfile.vector.ann import AnnIndex

    db = Database(path)
    lexical = index = None
    try:
        source = index_source(db)
        lexical = Bm25Index(db)
        dims = SqliteMetaStore(db).get(DIMS_KEY)
        matcher = _token_matcher(db)
        if vector_index is not None and dims is not None:
            made = make_index(vector_index, db, int(dims))
            index = made if isinstance(made, AnnIndex) else None
            if index is None:
                made.close()
        _yield_cpu()  # the ingest comes first: publish with the CPU it leaves
        seen, settled, compacted = -1, True, True
        quiet_since = time.monotonic()
        while not _parent_gone():
            high = source.chunk_max_id()
            if high != seen:  # writes go on: tokenise them, publish when enough are new
                seen, settled, compacted = high, False, False
                quiet_since = time.monotonic()
                lexical.publish(when_due=True)
                if index is not None and _vector_due(index, high):
                    index.merge(blocking=False)
                # The new chunks' statement flags (preference recall) and word pieces
                # (token match), a page of each at a time: publishing comes first while
                # the ingest runs (a pass returns to BM25 sooner); the rest once it pauses.
                if not _parent_gone():
                    backfill(db, pause=0.0, pages=1)
                if matcher is not None and not _parent_gone():
                    backfill_token_sets(db, matcher, pause=0.0, pages=1)
                continue
            quiet = time.monotonic() - quiet_since
            if not settled and quiet >= POLL_SECONDS:
                # The writes paused (maybe the ingest ended): publish the rest at once,
                # so searches after the ingest find nearly everything published.
                settled = True
                # An L0 generation, the quickest to write: until it is out, searches rank
                # the chunks it adds with FTS5 (~20 ms a search for 25k chunks at 117k).
                # The full merge follows after COMPACT_AFTER.
                lexical.publish(quick=True)
                # The vector generation, in a thread beside the flags and word pieces:
                # mostly numpy and file writes, it overlaps their Python. Left for
                # after them, it came ~10 s after a 117k ingest under a busy searching
                # process (this one runs at idle priority), which meanwhile searched a
                # 22k-row float32 delta (+0.7 ms a search) and read it back from SQLite
                # in every new process.
                merging = None
                if index is not None and _vector_due(index, high, final=True):
                    # Wait for the build lock: a searching process may hold it for a
                    # moment (it removes old generations), and this is the last chance.
                    merging = threading.Thread(
                        target=index.merge,
                        kwargs={"blocking": True},
                        name="mindfile-publish-vectors",
                        daemon=True,
                    )
                    merging.start()
                backfill(db, pause=0.0)  # the last chunks' statement flags
                if matcher is not None:  # the word pieces of the last chunks
                    backfill_token_sets(db, matcher, pause=0.0)
                if merging is not None:
                    merging.join()
                continue
            if not compacted and quiet >= COMPACT_AFTER:
                # The ingest is over: fold the BM25 L0 generation into the base now, at
                # idle priority, rather than leave the full merge to the first process
                # that writes next (seconds of CPU and ~+400 MB in a serving process at
                # 117k chunks; benchmarks/README.md "load.py").
                compacted = True
                if lexical.stats().get("l0_generation") is not None:
                    lexical.merge()
                continue
            if quiet > IDLE_SECONDS:
                break
            time.sleep(POLL_SECONDS)
    finally:
        if index is not None:
            index.close()
        if lexical is not None:
            lexical.close()
        db.close()
    return 0


if __name__ == "__main__":  # pragma: no cover - the child (tested through the engine)
    logging.basicConfig(level=logging.WARNING)
    sys.exit(serve(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
