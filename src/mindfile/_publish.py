"""Publish the derived indexes from a helper process while a bulk ingest runs
(docs/architecture.md, "Index lifecycle", step 6).

A bulk ingest writes chunks and nothing else: tokenising them for BM25 in the writing
process cost ~35% of its throughput (the Python tokeniser holds the GIL the writer
needs; benchmarks/README.md). Left for later, though, the work landed on the first
searches after the ingest: the ingesting process read every new vector back and ranked
with FTS5 for seconds while its BM25 delta was built.

So once a process has written :data:`START_AFTER` chunks without a pause, it starts two
helper processes (``python -m mindfile._publish STORE ROLE [KIND]``) that open the same
store file and read the committed chunks, on the machine's other core: the ``index``
helper (at the normal CPU priority) publishes BM25 generations and the vector index's
generations (exact, zvec, lancedb) as they grow; the ``flags`` helper classifies the new
chunks for preference recall (:func:`mindfile.retrieve.preferences.backfill`) and stores
their word pieces for token match (at the lowest priority). Two processes, because each
job is bound to one interpreter's lock: one helper doing all of it left ~85k of a 117k
ingest's chunks unclassified when the ingest ended. The writer never waits for them;
when the ingest ends, the writing process (and any other) finds published generations
covering all but the last chunks and maps them instead of building them. The cost: at 1M
chunks the ingest ran 5-9% slower beside the (then single) helper (its reads keep the
WAL from being reset, and exact generations are rewritten as the base grows;
benchmarks/README.md), against a first search after the ingest of 0.6-7.7 s instead of
16 s.

- The helpers read the database and write under ``<store>.index/``, taking the same
  build locks as any process that publishes (one publisher at a time per folder); their
  only database writes are the statement flags and word pieces (short transactions of
  2,000 rows).
- While it runs, a helper holds a shared lock on ``<store>.index/publisher-<role>.lock``:
  every process on the store (not only the one that started it) leaves that role's work
  to it (:func:`helper_running`) instead of doing it again in its own interpreter.
- While the writes go on, the index helper publishes BM25 when due, and the vector index
  when due in a thread of its own at niceness :data:`VECTOR_NICE` (a zvec merge can take
  minutes; BM25 publishing does not wait for it). When the writes pause (longer than
  the gaps between the ingest's batches: :class:`Pauses`) it publishes what is new at
  once, BM25 first and as an L0 generation (the quickest to write: until it is out,
  searches rank the newest chunks with FTS5; a full BM25 merge running then stops),
  then the vector index; after :data:`COMPACT_AFTER` more it folds the BM25 L0
  generation into the base. The flags helper works a page of each kind at a time until
  none is left.
- A helper exits when no chunk arrived for :data:`IDLE_SECONDS` (and, for the flags
  helper, none is left to do), when its stdin closes (the engine closed, or its process
  died), or after a failure (logged to stderr, which is discarded: the indexes then
  catch up in the searching process as before).
- ``MINDFILE_PUBLISHER=0`` turns it off; it is off on one-CPU machines, in frozen
  applications, for in-memory, read-only and Postgres stores, and with
  ``lexical_index="fts5"`` and an index that publishes nothing (sqlite-vec).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mindfile._helpers import defer_flags_to, helper_processes_allowed

if TYPE_CHECKING:
    from mindfile.retrieve.lexical import Bm25Index
    from mindfile.vector.ann import AnnIndex

__all__ = [
    "IDLE_SECONDS",
    "ROLES",
    "START_AFTER",
    "Publisher",
    "helper_running",
    "publisher_allowed",
    "publisher_for",
]

logger = logging.getLogger(__name__)

#: Chunks written by one engine, without a pause of ``IDLE`` seconds, before the helper
#: starts (smaller ingests are caught up at the next search or by the idle follower).
START_AFTER = 20_000
#: The helper exits after this long without a new chunk.
IDLE_SECONDS = 5.0
#: How often the helper looks for new chunks; writes pausing this long at least (maybe
#: the end of the ingest: see :class:`Pauses`) publish everything new at once.
POLL_SECONDS = 0.2
#: A pause is the end of the writes (for now) once it lasts this many times the longest
#: of the last :data:`PAUSES_SEEN` gaps between new chunks, at most :data:`SETTLE_MAX`.
SETTLE_FACTOR = 1.5
PAUSES_SEEN = 16
SETTLE_MAX = 2.0
#: Writes paused this long after that (the ingest is over): merge the BM25 L0 into the base.
COMPACT_AFTER = 1.0
#: The flags helper's niceness where ``SCHED_IDLE`` is missing (it works with the CPU
#: the ingest and the searches leave).
NICE = 10
#: The niceness of the index helper's vector-merge thread (and of the threads zvec's
#: ``optimize()`` starts from it): below the writer and the BM25 thread. Growing a
#: zvec store beside a searching process, at the normal priority the ingest ran ~20%
#: slower than when vector merges blocked BM25 (1,429-1,539 against 1,835-1,908
#: chunks/s); at niceness 10, 1,780-1,836, with BM25 still published within 1-2 s of
#: the ingest's end (benchmarks/README.md, "A store that keeps growing").
VECTOR_NICE = 10
#: The two helpers of a bulk ingest: ``index`` publishes BM25 and the vector index,
#: ``flags`` writes the statement flags and word pieces. Each is Python-bound (the GIL):
#: one process doing both kept up with neither, leaving ~85k of a 117k ingest's chunks
#: unclassified when it ended (benchmarks/README.md, "After a bulk ingest").
ROLES = ("index", "flags")


def helper_environment() -> dict[str, str]:
    """The helpers' environment: ours, with one BLAS thread and numpy's
    transparent-huge-page advice off unless the caller chose (``OPENBLAS_NUM_THREADS``,
    ``NUMPY_MADVISE_HUGEPAGE``). A generation merge allocates ~1.5 GB of short-lived
    arrays at 117k chunks; with the advice, where the kernel compacts memory for huge
    pages at fault time (``defrag=madvise``, the default), the first merge took 2.0-2.9 s
    instead of 0.8-0.9 s, and while a bulk ingest fills the page cache every merge can be
    a first (benchmarks/README.md)."""
    env = dict(os.environ)
    env.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
    # One BLAS thread: a helper works on the machine's other core, and BLAS's worker
    # threads (the exact index's sign-bit products) spin on the writer's core between
    # calls.
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    return env


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
    from mindfile.storage.db import Database
    from mindfile.vector.ann import AnnIndex

    if read_only or not isinstance(db, Database) or db.in_memory or not publisher_allowed():
        return None
    kind = index.name if isinstance(index, AnnIndex) else None
    if kind is None and lexical is None:
        return None
    publisher = Publisher(path, kind)
    folder = Path(f"{path}.index")
    index_deferred = publisher.deferred_to(folder, "index")
    if lexical is not None:
        lexical.deferred = index_deferred  # type: ignore[method-assign]
    # statement flags and token match's word pieces
    defer_flags_to(db, publisher.deferred_to(folder, "flags"))
    if isinstance(index, AnnIndex):
        index.deferred = index_deferred  # type: ignore[method-assign]
        publisher.follow = index.follow
    return publisher


#: How long :func:`helper_running`'s answer is reused (it is asked on searches).
_RUNNING_TTL = 0.25
_running_cache: dict[tuple[Path, str], tuple[float, bool]] = {}


def helper_running(folder: Path, role: str) -> bool:
    """Whether a helper of ``role`` (``"index"``: BM25 and vector generations;
    ``"flags"``: statement flags and word pieces) runs on the store whose index folder
    is ``folder``, started by any process: it holds a shared lock on
    ``<folder>/publisher-<role>.lock`` for as long as it runs. Other processes then
    leave that work to it rather than do it again in their own interpreter (their
    searches would wait for it). Cached for :data:`_RUNNING_TTL` seconds."""
    key = (folder, role)
    now = time.monotonic()
    hit = _running_cache.get(key)
    if hit is not None and now - hit[0] < _RUNNING_TTL:
        return hit[1]
    running = _lock_held(folder / f"publisher-{role}.lock")
    _running_cache[key] = (now, running)
    return running


def _lock_held(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:  # no helper ever ran here
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # releases the probe's lock, if it got one
    return False


@contextlib.contextmanager
def _holding_role(folder: Path, role: str) -> Iterator[None]:
    """Hold the shared lock :func:`helper_running` probes, while the helper runs."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"publisher-{role}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


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
        #: The helper process of each role (:data:`ROLES`), once started.
        self._procs: dict[str, subprocess.Popen[bytes] | None] = dict.fromkeys(ROLES)
        self._closed = False
        self._pid = os.getpid()
        #: Helpers started so far (for tests and ``info()``).
        self.started = 0
        #: Called after each write while the helper runs (the vector index's
        #: :meth:`~mindfile.vector.ann.AnnIndex.follow`), or None.
        self.follow: Callable[[int], None] | None = None

    @property
    def running(self) -> bool:
        """Whether a helper of this engine runs (either role)."""
        return any(self.role_running(role) for role in ROLES)

    def role_running(self, role: str) -> bool:
        proc = self._procs[role]
        return proc is not None and proc.poll() is None

    def deferred_to(self, folder: Path, role: str) -> Callable[[], bool]:
        """A check: whether ``role``'s helper runs, this engine's or another process's
        (what an index's ``deferred`` asks)."""
        return lambda: self.role_running(role) or helper_running(folder, role)

    def wrote(self, chunks: int) -> None:
        """``chunks`` were just committed by this engine. While the helper runs, the
        engine's vector index catches up with them at once (:attr:`follow`)."""
        if chunks <= 0 or os.getpid() != self._pid:
            return
        self._start_if_due(chunks)
        follow = self.follow
        if follow is not None and self.running:
            try:
                follow(chunks)
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
            missing = [role for role in ROLES if not self.role_running(role)]
            if self._pending < self._start_after or not missing:
                return
            self._pending = 0
            try:  # each role that is not running (one may have died or finished)
                for role in missing:
                    self._reap(role)
                    self._procs[role] = self._spawn(role)
            except OSError as exc:  # no helper: the indexes catch up at the next search
                logger.warning("could not start the index publisher: %s", exc)
                self._closed = True
                return
            self.started += 1

    def _spawn(self, role: str) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "mindfile._publish", self._path, role]
        if self._vector_index is not None:
            argv.append(self._vector_index)
        return subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            env=helper_environment(),
        )

    def _reap(self, role: str) -> None:
        proc, self._procs[role] = self._procs[role], None
        if proc is not None:
            _stop(proc, wait=0.0)

    def wait(self, timeout: float) -> bool:
        """Wait until the helpers have exited (tests, benchmarks); True if none runs."""
        end = time.monotonic() + timeout
        for proc in self._procs.values():
            if proc is None:
                continue
            try:
                proc.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                return False
        return True

    def close(self, timeout: float = 2.0) -> None:
        """Tell the helpers to stop after the generation or page they are writing."""
        with self._lock:
            self._closed = True
            procs = list(self._procs.values())
            self._procs = dict.fromkeys(ROLES)
        for proc in procs:
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


def _yield_cpu(role: str) -> None:
    """The flags helper runs at the lowest CPU priority, ``SCHED_IDLE`` where there is
    one (Linux: only when a core would otherwise idle), else niceness :data:`NICE`. The
    index helper keeps the normal priority: what it has not published when the ingest
    ends, searches rank with FTS5 at a cost that grows with it. At niceness 10 it left
    1.7-9.2k of a 117k ingest's chunks unpublished and the first 60 searches after it
    ran at p50 7.9-13.3 ms; at the normal priority 0.9-1.3k and 7.9-9.1 ms, with the same
    ingest rate (3,723-3,909 against 3,679-3,922 chunks/s; 300k chunks: 3,449 against
    3,193). Both at ``SCHED_IDLE``, the index helper fell ~70k vectors behind
    (benchmarks/README.md, "After a bulk ingest")."""
    if role != "flags":
        return
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


def serve(path: str, role: str, vector_index: str | None) -> int:
    """The helper's loop for ``role`` (:data:`ROLES`): work, wait for more chunks, stop
    when idle or told to. Holds the role's lock meanwhile (:func:`helper_running`)."""
    from mindfile.storage.db import Database

    if role not in ROLES:
        raise SystemExit(f"unknown role {role!r}")
    db = Database(path)
    try:
        with _holding_role(Path(f"{path}.index"), role):
            _yield_cpu(role)  # the flags helper works with the CPU nobody else wants
            if role == "index":
                _serve_index(db, vector_index)
            else:
                _serve_flags(db)
    finally:
        db.close()
    return 0


def _serve_index(db: Any, vector_index: str | None) -> None:
    """Publish BM25 and the vector index as the chunks come, everything new when the
    writes pause, and fold the BM25 L0 generation into the base once they are over."""
    from mindfile.retrieve.lexical import Bm25Index
    from mindfile.storage.index_source import index_source
    from mindfile.storage.meta import DIMS_KEY, SqliteMetaStore
    from mindfile.vector import make_index
    from mindfile.vector.ann import AnnIndex

    lexical = index = vectors = None
    try:
        source = index_source(db)
        lexical = Bm25Index(db)
        dims = SqliteMetaStore(db).get(DIMS_KEY)
        if vector_index is not None and dims is not None:
            made = make_index(vector_index, db, int(dims))
            index = made if isinstance(made, AnnIndex) else None
            if index is None:
                made.close()
        vectors = _VectorMerges(index) if index is not None else None
        seen, settled, compacted = -1, True, True
        quiet_since = time.monotonic()
        pauses = Pauses()
        while not _parent_gone():
            if vectors is not None:
                vectors.check()
            high = source.chunk_max_id()
            if high != seen:  # writes go on: tokenise them, publish when enough are new
                if seen >= 0:
                    pauses.saw(time.monotonic() - quiet_since)
                seen, settled, compacted = high, False, False
                quiet_since = time.monotonic()
                # The merge in a thread of its own: this one goes on tokenising what
                # comes meanwhile, and the published generation takes it over.
                lexical.publish(when_due=True, wait=False)
                if vectors is not None:
                    vectors.request(high)
                continue
            quiet = time.monotonic() - quiet_since
            settle_after = pauses.settle_after()
            if not settled and quiet >= settle_after:
                # The writes paused (maybe the ingest ended): publish the rest at once,
                # so searches after the ingest find nearly everything published.
                settled = True
                # An L0 generation, the quickest to write: until it is out, searches rank
                # the chunks it adds with FTS5 (~20 ms a search for 25k chunks at 117k).
                # The full merge follows after COMPACT_AFTER.
                lexical.publish(quick=True)
                if vectors is not None:
                    # After the BM25 L0 (the vector thread may be merging already).
                    vectors.request(high, final=True)
                continue
            if not compacted and quiet >= settle_after + COMPACT_AFTER:
                # The ingest is over: fold the BM25 L0 generation into the base now, while
                # the writer is idle (at the normal priority: at SCHED_IDLE it did not make
                # the searches meanwhile faster, benchmarks/README.md "After a bulk
                # ingest, part 4"), rather than leave the full merge to the first process
                # that writes next (seconds of CPU and ~+400 MB in a serving process at
                # 117k chunks; benchmarks/README.md "load.py").
                compacted = True
                if lexical.stats().get("l0_generation") is not None:
                    # In the background: if the writes resume meanwhile, this loop goes
                    # on tokenising them (the fold took 7-14 s at ~150k chunks when
                    # a writer paused for a second mid-ingest and went on). Again at
                    # the next turn when a merge runs already.
                    compacted = lexical.merge(wait=False)
                continue
            if quiet > IDLE_SECONDS and (vectors is None or vectors.idle()):
                break
            time.sleep(POLL_SECONDS)
    finally:
        if index is not None:
            index.close()  # a merge running stops after the batch it reads
        if vectors is not None:
            vectors.close()
        if lexical is not None:
            lexical.close()


class Pauses:
    """When the writes have paused for good (for now), as the index helper sees them.

    A bulk ingest commits in batches (``store_many``): between two, the writer embeds
    and chunks the next one, and the helper sees no new chunk for a while (0.2-0.5 s in
    ``benchmarks/grow.py``, 200 messages a call). Taken for the end of the ingest, each
    such gap made the helper publish a quick L0 generation (rewriting the whole L0) every
    1-3 s, and wait for a full merge running then. A pause counts once it lasts
    :data:`SETTLE_FACTOR` times the longest of the last :data:`PAUSES_SEEN` gaps (at
    least :data:`POLL_SECONDS`, at most :data:`SETTLE_MAX`)."""

    def __init__(self) -> None:
        self._gaps: deque[float] = deque(maxlen=PAUSES_SEEN)

    def saw(self, gap: float) -> None:
        """The helper saw new chunks ``gap`` seconds after the ones before."""
        self._gaps.append(gap)

    def settle_after(self) -> float:
        """How long the writes must pause to count as ended."""
        longest = max(self._gaps, default=0.0)
        return min(max(POLL_SECONDS, SETTLE_FACTOR * longest), SETTLE_MAX)


class _VectorMerges:
    """The index helper's vector publishing, in a thread of its own.

    A vector merge can take minutes (zvec at 1M chunks: 50-440 s, benchmarks/README.md
    "1M while the store keeps growing"). When it ran in the helper's loop, no BM25
    generation was published meanwhile: every process ranked the chunks written since
    with FTS5, at a cost that grows with them (p50 697 ms a search with 100k of them at
    1M chunks). Requests coalesce: the thread merges when the latest is due, after the
    merge it runs, if one runs."""

    def __init__(self, index: AnnIndex) -> None:
        self._index = index
        self._cond = threading.Condition()
        self._want: tuple[int, bool] | None = None  # (newest chunk id, final)
        self._busy = False
        self._closed = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name="mindfile-publish-vectors", daemon=True
        )
        self._thread.start()

    def request(self, high: int, *, final: bool = False) -> None:
        """Publish when due, given the newest chunk id ``high``; ``final``: the writes
        paused, publish what is new at once (waiting for the build lock)."""
        with self._cond:
            held = self._want
            self._want = (high, final or (held is not None and held[1]))
            self._cond.notify_all()

    def idle(self) -> bool:
        """No merge runs and none is asked for."""
        with self._cond:
            return not self._busy and self._want is None

    def check(self) -> None:
        """Raise the thread's failure, if any, in the helper's loop (which then exits)."""
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        # Below the writer and the BM25 thread: what zvec's optimize() starts from this
        # thread inherits it (Linux: a thread's niceness is its own).
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), VECTOR_NICE)
        while True:
            with self._cond:
                while self._want is None and not self._closed:
                    self._cond.wait()
                want = self._want
                if self._closed or want is None:
                    return
                high, final = want
                self._want = None
                self._busy = True
            try:
                if _vector_due(self._index, high, final=final):
                    # Final: wait for the build lock (a searching process may hold it
                    # for a moment to remove old generations); this is the last chance.
                    self._index.merge(blocking=final)
            except BaseException as exc:  # the helper exits; searches catch up instead
                self._error = exc
            finally:
                with self._cond:
                    self._busy = False

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()


def _serve_flags(db: Any) -> None:
    """Classify the new chunks for preference recall and store their word pieces
    (token match), a page of each at a time, until no chunk arrived for a while and
    none is left."""
    from mindfile.retrieve.preferences import backfill
    from mindfile.retrieve.token_match import backfill as backfill_token_sets
    from mindfile.storage.index_source import index_source

    source = index_source(db)
    matcher = _token_matcher(db)
    seen = -1
    quiet_since = time.monotonic()
    while not _parent_gone():
        high = source.chunk_max_id()
        if high != seen:
            seen, quiet_since = high, time.monotonic()
        done = backfill(db, pause=0.0, pages=1)
        if matcher is not None and not _parent_gone():
            done += backfill_token_sets(db, matcher, pause=0.0, pages=1)
        if done:
            continue
        if time.monotonic() - quiet_since > IDLE_SECONDS:
            break
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":  # pragma: no cover - the child (tested through the engine)
    logging.basicConfig(level=logging.WARNING)
    sys.exit(serve(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
