"""BM25 over chunks, derived from SQLite like the vector index: a base published on
disk and memory-mapped by every process, plus each process's in-memory delta.

Why not rank with FTS5 itself? FTS5's ``bm25()`` costs a few microseconds per matching
row, so an OR query whose words are common scans tens of thousands of rows: 25-80 ms at
100k chunks on a laptop core. This index keeps postings as arrays and scores with numpy
(``bincount`` over the query terms' postings), typically well under a millisecond.
When a query's words match many postings of a published generation (200k and more:
common words at 1M chunks), it skips the windows of 16 chunks that cannot reach the
top k (block-max pruning, :func:`mindfile.retrieve.lexical_published.top_pruned`), with
exactly the exhaustive answer.

It reproduces FTS5's ``bm25(chunks_fts, w_text, w_before, w_after)`` exactly: the same
tokenizer (FTS5's own ``porter unicode61 remove_diacritics 2``, called through apsw),
the same IDF (``log((N - n + 0.5) / (n + 0.5))``, floored at 1e-6), k1 = 1.2, b = 0.75,
per-column weighted term frequency and unweighted document length. A conformance test
compares it with FTS5 on the same store.

Why a base on disk? Tokenising a store costs ~0.1 ms per chunk in Python: seconds at
100k chunks, for every process, and a private copy of the postings in each one's heap.
The first process that builds the index publishes it (``<store>.index/bm25/``, see
:mod:`mindfile.retrieve.lexical_disk`); later processes map it (shared page cache, no
build) and tokenise only the chunks written after it. Statistics (N, average length,
document frequencies) always cover base and delta together, so scores are the same as
one index over everything.

Catching up: new chunks are the ids above the highest held (ids only grow); updates of
indexed text and deletions are read from ``chunks_changes`` (triggers, migration 0001).
A document that changes is tombstoned (in a published generation: a bit in this
process's alive mask) and re-added to the delta. When the delta reaches ``MERGE_MIN``
chunks and ``MERGE_FRACTION`` of the L0, a background thread publishes it as a new L0
generation (the L0's and the delta's postings, plus the base chunks they tombstone);
when the L0 reaches ``L0_FRACTION`` of the base, or tombstones a quarter of a part,
everything is merged into a new base. Numpy, no re-tokenising, under the folder's build
lock; every process switches at its next search.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from mindfile.retrieve.fts import COLUMN_WEIGHTS
from mindfile.retrieve.lexical_batch import Analyzer
from mindfile.retrieve.lexical_changes import Changes, read_changes
from mindfile.retrieve.lexical_disk import Cancelled, LexManifest, collect
from mindfile.retrieve.lexical_publish import (
    fits,
    merge_due,
    open_generations,
    write_generation,
)
from mindfile.retrieve.lexical_state import Delta, State
from mindfile.storage.backend import AnyDatabase
from mindfile.storage.db import Database
from mindfile.storage.index_source import index_source
from mindfile.vector.ann_disk import BUILD_LOCK, MANIFEST, file_lock, index_root, store_id
from mindfile.vector.base import VectorFilter

__all__ = ["Bm25Index"]

#: Chunks waiting to be indexed above which a search ranks with FTS5 while the index
#: catches up in the background (tokenising ~0.1 ms a chunk would block the search
#: longer than FTS5 takes to answer it).
BACKLOG = 2_000
#: The same while the bulk ingest's index helper publishes for this process
#: (:meth:`Bm25Index.deferred`): it puts the chunks out within a second or two, so a
#: search does not tokenise more than this itself (2,000 chunks took 100-170 ms, the
#: first search after a 117k ingest); FTS5 ranks them meanwhile, on the side thread.
DEFERRED_BACKLOG = 256
#: The delta is published when it holds this many chunks and this share of the L0
#: (or tombstones reach a quarter): a fresh process tokenises at most that. Publishing
#: rewrites the small L0 generation; the L0 is folded into a new base once it holds
#: ``L0_FRACTION`` of the base's documents (each posting is rewritten O(log N) times).
MERGE_MIN = 2_000
MERGE_FRACTION = 0.25
L0_FRACTION = 0.25
#: Where the base lives, under the store's index folder (``<store>.index/``).
FOLDER = "bm25"
#: Chunks tokenised between two takes of the index lock while catching up.
APPLY_BATCH = 2048
#: Chunks read from SQLite in one statement (one take of the database lock).
READ_PAGE = 4 * APPLY_BATCH
#: First delay before retrying a failed background build, and its cap (doubling).
RETRY_SECONDS = 1.0
RETRY_MAX_SECONDS = 300.0

logger = logging.getLogger("mindfile.retrieve")


class Bm25Index:
    """Exact BM25 (FTS5-compatible) over ``chunks``: a shared base plus a delta."""

    name = "memory"

    def __init__(
        self,
        db: AnyDatabase,
        *,
        weights: tuple[float, float, float] = COLUMN_WEIGHTS,
        persist: bool = True,
    ) -> None:
        self._db = db
        self._source = index_source(db)
        tokenizer = db.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
        self._analyzer = Analyzer(tokenizer, weights)
        self._lock = threading.Lock()
        self._sync = threading.Lock()  # one catch-up at a time (see "catching up")
        self._builder: threading.Thread | None = None
        self._merger: threading.Thread | None = None
        #: Set while a quick publish waits for a background merge: a full one stops.
        self._cancel = threading.Event()
        self._closing = False
        self._failure: str | None = None
        self._failures = 0
        self._retry_at = 0.0
        self._merge_failed_at: float | None = None
        self._dirty = True
        self._state = State(None)
        self._folder: Path | None = None
        self._store = ""
        self._manifest_sig: tuple[int, int, int] | None = None
        self._broken: set[str] = set()  # generations that failed to open
        # A Postgres store has no file to publish next to: its index lives in the heap
        # (as a ":memory:" store's), caught up from the database like any other.
        if persist and isinstance(db, Database) and not db.in_memory:
            root, temporary = index_root(db)
            store = store_id(db, create=not db.readonly)
            if not temporary and store is not None:
                self._folder, self._store = root / FOLDER, store

    # -- terms --------------------------------------------------------------------------

    def query_terms(self, text: str) -> list[str]:
        """The stemmed, de-duplicated, stop-word-free terms of a query (as FTS5 sees them)."""
        return self._analyzer.query_terms(text)

    def content_terms(self, text: str) -> list[str]:
        """:meth:`query_terms` of a whole text, however many words it has (a query's
        are capped at ``MAX_QUERY_TERMS``)."""
        return self._analyzer.content_terms(text)

    # -- state --------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Whether the first build has finished."""
        return self._state.ready

    @property
    def persisted(self) -> bool:
        """Whether this index reads and publishes a base on disk (``<store>.index/bm25``)."""
        return self._folder is not None

    def state(self) -> str:
        """``ready``, ``building``, ``not built`` or ``failed: <reason>`` (shown by info())."""
        if self._builder is not None:
            return "building"
        if self._failure is not None:
            return f"failed: {self._failure}"
        return "ready" if self._state.ready else "not built"

    def stats(self) -> dict[str, object]:
        """Sizes for info(): live documents in the published generations (base and L0)
        and in this process's delta."""
        state = self._state
        manifest = state.manifest
        return {
            "state": self.state(),
            "persisted": self.persisted,
            "base_docs": state.published_docs,
            "base_generation": None if manifest is None else manifest.generation,
            "l0_generation": None if manifest is None else manifest.l0,
            "delta_docs": state.delta_docs,
        }

    def usable(self) -> bool:
        """Whether a search now would answer without a long catch-up.

        False before the first build and while more than ``BACKLOG`` chunks are waiting
        to be indexed (a bulk ingest; ``DEFERRED_BACKLOG`` while a helper process
        publishes for this one and a published generation is held): callers then rank
        with FTS5 and call :meth:`warm`.
        A published base on disk counts as built: a fresh process maps it and catches up
        only what came after it.
        """
        if self._builder is not None:
            return False
        if not self._state.ready and self._folder is not None and self._sync.acquire(False):
            try:
                self._poll_base()
            finally:
                self._sync.release()
        state = self._state
        if not state.ready and state.base is None:
            return False
        newest = self._source.chunk_max_id()
        wait = BACKLOG
        if newest - state.max_rowid > DEFERRED_BACKLOG and state.manifest is not None:
            wait = DEFERRED_BACKLOG if self.deferred() else BACKLOG
        if newest - state.max_rowid <= wait:
            return True
        if state.ready and self._folder is not None and self._sync.acquire(False):
            try:  # another process may have published it: adopt that in the background
                self._poll_base()
            finally:
                self._sync.release()
        return False

    def docs_held(self) -> int:
        """Live documents in the index as it stands (no catching up, no lock)."""
        return self._state.docs

    def backlog(self) -> int:
        """Chunks added since this index last caught up (all of them before the first
        build): what a search would index before answering (updates not counted)."""
        return max(0, self._source.chunk_max_id() - self._state.max_rowid)

    def warm(self) -> None:
        """Build or catch up in a background thread (one at a time); returns at once.

        The first build costs seconds at 100k chunks (tokenising every chunk and its
        context in Python), paid once per store: the result is published on disk for
        every later process. Meanwhile callers rank with FTS5. After a failed build the
        next attempt waits ``RETRY_SECONDS`` (doubling up to ``RETRY_MAX_SECONDS``).
        """
        if self._builder is not None or self._closing or self.deferred():
            return
        if self._failure is not None and time.monotonic() < self._retry_at:
            return
        with self._lock:
            if self._builder is None:
                self._builder = threading.Thread(
                    target=self._build_in_background, name="mindfile-bm25-build", daemon=True
                )
                self._builder.start()

    def _build_in_background(self) -> None:
        try:
            self.size()
        except Exception as exc:  # any failure: searches keep using FTS5, and we say so
            if self._closing:
                return  # the store closed underneath the build: nothing to report
            self._failures += 1
            delay = min(RETRY_SECONDS * 2 ** (self._failures - 1), RETRY_MAX_SECONDS)
            self._failure = f"{type(exc).__name__}: {exc}"
            self._retry_at = time.monotonic() + delay
            logger.error(
                "BM25 index build failed (attempt %d; searches use FTS5, retry in %.1f s): %s",
                self._failures,
                delay,
                self._failure,
                exc_info=exc,
            )
        else:
            if self._failure is not None:
                logger.info("BM25 index built after %d failure(s)", self._failures)
            self._failure, self._failures = None, 0
        finally:
            self._builder = None

    def invalidate(self) -> None:
        """This process wrote: catch up before the next search."""
        self._dirty = True

    def follow(self) -> None:
        """After a bulk write: catch up and publish in the background now.

        When more than ``MERGE_MIN`` chunks wait to be indexed, start the catch-up (and
        the publishing that follows it), so a process that opens the store next maps a
        base covering the ingest instead of tokenising it. Not called by ``store_many``:
        doing it during an ingest cost ~38% of its throughput on 2 cores (the Python
        tokenising competes with the writer; benchmarks/README.md). No-op for an index
        that is not persisted, or while a catch-up or merge runs.
        """
        if self._folder is None or self._db.readonly or self._closing:
            return
        if self._builder is not None or self._merger is not None:
            return
        newest = self._source.chunk_max_id()
        if newest - self._state.max_rowid >= MERGE_MIN:
            self.warm()

    def publish(self, *, when_due: bool = False, quick: bool = False, wait: bool = True) -> bool:
        """Catch up and publish what this process holds beyond the published generations
        (a new L0 generation, or a new base; waits for the build lock). With
        ``when_due``, only once the delta is as large as a searching process would wait
        for (``MERGE_MIN``, ``MERGE_FRACTION``). With ``quick``, as an L0 generation even
        when the L0 has outgrown ``L0_FRACTION`` of the base (the L0 and the delta are
        rewritten, not everything: the end of a bulk ingest, when searches rank the
        unpublished chunks with FTS5 until it is out; the full merge follows at idle);
        a full merge running in the background then stops, its deltas go into the L0.
        What the index publisher process runs while a bulk ingest goes on
        (mindfile._publish); False when nothing was published. Without ``wait`` (with
        ``when_due``), the merge runs in a background thread and True means it started
        (or one runs already): the caller goes on tokenising what comes meanwhile, which
        the published generation takes over (:meth:`_carry`)."""
        if self._folder is None or self._db.readonly:
            return False
        if when_due:
            self._catch_up(merge=False)
            if not wait and self._merger is not None:
                return True  # what comes meanwhile waits for the next one
            if not merge_due(self._state, MERGE_MIN, MERGE_FRACTION):
                return False
            if not wait:
                return self._start_merge()
        return self._merge(force=False, blocking=True, prefer_l0=quick)

    def purge(self) -> None:
        """After deletes: no published file may keep a deleted chunk's terms.

        Republishes the base from what is live now (dead documents and terms only they
        held are dropped) and removes the old generations; when that is impossible
        (read-only, or another process holds the build lock for too long) the published
        base is removed instead. Other processes keep what they have mapped until they
        next switch bases.
        """
        folder = self._folder
        if folder is None or not (folder / MANIFEST).exists():
            return
        if not self._db.readonly and self._merge(force=True, blocking=True, full=True):
            return
        with contextlib.suppress(FileNotFoundError):
            (folder / MANIFEST).unlink()
        collect(folder, keep=[])

    def rebuild(self) -> None:
        """Drop everything (the published base too) and reload from SQLite."""
        with self._sync:
            with self._lock:
                self._state = State(None)
            self._manifest_sig = None
            self._ignore_published = True
            self._catch_up_serialised()
        self._ignore_published = False
        self._merge(force=True, full=True)

    _ignore_published = False

    def size(self) -> int:
        """Live documents after catching up."""
        self._catch_up()
        with self._lock:
            return self._state.docs

    def close(self) -> None:
        self._closing = True
        with self._lock:  # (both are set and started under it)
            threads = (self._builder, self._merger)
        for thread in threads:
            if thread is not None and thread is not threading.current_thread():
                thread.join()
        with self._lock:
            self._state = State(None)

    # -- the published base -------------------------------------------------------------

    def _valid(self, manifest: LexManifest | None) -> bool:
        """Whether a manifest fits this store and analyzer (:func:`fits`)."""
        return fits(manifest, self._store, self._analyzer.name, self._db, self._source)

    def _poll_base(self) -> None:
        """Switch to a newly published base (a cheap ``stat`` when nothing changed).

        Called under ``_sync``. Before the first build the switch is immediate (the
        state is empty); afterwards a background thread catches the new base up to the
        present and swaps it in, so no search waits for the tokenising.
        """
        folder = self._folder
        if folder is None or self._ignore_published or self._publishing:
            return  # (this process's merge switches to what it publishes itself)
        path = folder / MANIFEST
        try:
            st = os.stat(path)
            sig: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            sig = None
        if sig is None or sig == self._manifest_sig:
            return
        manifest = LexManifest.load(path)
        current = self._state.manifest
        if (
            manifest is None
            or {manifest.generation, manifest.l0} & self._broken
            or manifest == current
        ):
            self._manifest_sig = sig
            return
        if current is not None and manifest.max_id < current.max_id:
            self._manifest_sig = sig
            return  # older than what we hold
        if not self._state.ready:
            self._manifest_sig = sig
            fresh = self._open(manifest)
            if fresh is not None:
                with self._lock:
                    self._state = fresh
            return
        with self._lock:
            if self._merger is not None:
                return  # busy: look again at the next search
            self._manifest_sig = sig
            self._merger = threading.Thread(
                target=self._adopt_in_background,
                args=(manifest,),
                name="mindfile-bm25-adopt",
                daemon=True,
            )
            self._merger.start()

    def _open(self, manifest: LexManifest) -> State | None:
        """A state on a published base; None when it does not fit or cannot be read."""
        folder = self._folder
        assert folder is not None
        if not self._valid(manifest):
            return None
        try:
            return open_generations(folder, manifest, self._state)
        except (OSError, ValueError) as exc:  # removed meanwhile, or damaged: rebuild
            if (
                isinstance(exc, FileNotFoundError)
                and LexManifest.load(folder / MANIFEST) != manifest
            ):
                # A publisher replaced the manifest (and removed generations it no
                # longer names) after it was read: not damage; the next poll takes it.
                self._manifest_sig = None
                return None
            logger.warning("ignoring BM25 base %s (%s)", manifest.generation, exc)
            self._broken.update(g for g in (manifest.generation, manifest.l0) if g)
            self._want_merge = True
            return None

    def _adopt_in_background(self, manifest: LexManifest) -> None:
        try:
            fresh = self._open(manifest)
            if fresh is not None:
                self._adopt(fresh)
        except Exception:  # logged; searches go on with the state held
            logger.exception("switching to BM25 base %s failed", manifest.generation)
        finally:
            self._merger = None

    def _adopt(self, fresh: State) -> None:
        """Catch ``fresh`` (not yet visible) up to the present, then swap it in.

        Most of the catching up happens without ``_sync`` (searches go on with the old
        state); the last step, under it, applies what was written meanwhile."""
        rounds = 0  # complete catch-ups (all pages), a few to converge with writers
        while rounds < 3 and not self._closing:
            read = self._read_changes(fresh)
            if read is None:
                break
            if self._apply(fresh, read):
                rounds += 1
        with self._sync:
            if self._closing:
                return
            while True:
                read = self._read_changes(fresh)
                if read is None or self._apply(fresh, read):
                    break
            if fresh.published_compact_soon() or not fresh.ready:
                return  # no better than what we hold (its delta gathers the same tombstones)
            with self._lock:
                self._state = fresh

    _want_merge = False
    #: Set while this process's merge writes a generation and switches to it.
    _publishing = False

    @staticmethod
    def deferred() -> bool:
        """Whether another process catches up and publishes for this one now (the bulk
        ingest's publisher, mindfile._publish, set by the engine): then this process
        does not build or merge itself, and searches rank what the index holds plus
        FTS5 for the newer chunks until the publisher's generation is adopted."""
        return False

    def _maybe_merge(self) -> None:
        """Publish a new base in the background when the delta has grown enough."""
        if self._folder is None or self._closing or self._db.readonly:
            return
        state = self._state
        if not state.ready or self._merger is not None or self.deferred():
            return
        if not (merge_due(state, MERGE_MIN, MERGE_FRACTION) or self._want_merge):
            return
        self._start_merge()

    def _start_merge(self, *, full: bool = False) -> bool:
        """Publish in a background thread; False when a merge or a switch runs already,
        or the last merge failed less than ``RETRY_MAX_SECONDS`` ago."""
        failed = self._merge_failed_at
        if failed is not None and time.monotonic() - failed < RETRY_MAX_SECONDS:
            return False
        with self._lock:
            if self._merger is not None:
                return False
            self._want_merge = False
            self._merger = threading.Thread(
                target=self._merge_in_background,
                args=(full,),
                name="mindfile-bm25-merge",
                daemon=True,
            )
            self._merger.start()
            return True

    def _merge_in_background(self, full: bool = False) -> None:
        try:
            if full:
                self._merge(force=True, blocking=True, full=True)
            else:
                self._merge(force=False)
        except Cancelled:  # by a quick publish, which publishes its deltas instead
            logger.info("a full BM25 merge in %s gave way to a quick publish", self._folder)
        except Exception:  # logged; searches stay exact on the base and deltas held
            self._merge_failed_at = time.monotonic()
            logger.exception("publishing the BM25 index in %s failed", self._folder)
        finally:
            self._merger = None

    def merge(self, *, wait: bool = True) -> bool:
        """Publish this process's index as one new base now (waits for the build lock).

        Returns False when there is nothing to publish (in-memory store, read-only, not
        built). Normally automatic (and cheaper: small L0 generations, see
        ``MERGE_MIN``, ``MERGE_FRACTION`` and ``L0_FRACTION``). Without ``wait`` it runs
        in a background thread (True: it started), as the bulk ingest's helper folds
        the L0 into the base when the writes pause: if they resume meanwhile, it goes
        on tokenising them (a full merge at ~150k chunks took 7-14 s there).
        """
        if not wait:
            if self._folder is None or self._db.readonly:
                return False
            return self._start_merge(full=True)
        return self._merge(force=True, blocking=True, full=True)

    def _merge(
        self,
        *,
        force: bool,
        blocking: bool = False,
        full: bool = False,
        prefer_l0: bool = False,
    ) -> bool:
        """Publish what this process holds: as a new L0 generation (cost: the L0 and the
        delta) or, when the L0 reaches ``L0_FRACTION`` of the base (unless ``prefer_l0``),
        tombstones pile up, or ``full``, as a new base (cost: everything)."""
        folder = self._folder
        if folder is None or self._db.readonly or self._db.held_by_me():
            return False
        with self._lock:  # (a merger is set and started under it: never seen unstarted)
            running = self._merger
        if running is not None and running is not threading.current_thread():
            # A background merge or switch: let it finish (and switch this process to
            # what it published) rather than publish its frozen deltas a second time.
            # A quick publish (an ingest's end) stops a full merge instead: its deltas
            # stay frozen and go out in the L0; the fold follows at idle.
            if prefer_l0:
                self._cancel.set()
            try:
                running.join()
            finally:
                if prefer_l0:
                    self._cancel.clear()
        folder.mkdir(parents=True, exist_ok=True)
        with file_lock(folder / BUILD_LOCK, blocking=blocking) as got:
            if not got:
                return False  # another process publishes
            self._catch_up(merge=False)
            with self._sync:
                state = self._state
                if not state.ready or self._closing:
                    return False
                published = LexManifest.load(folder / MANIFEST)
                if (
                    not force
                    and published is not None
                    and published.max_id >= state.max_rowid
                    and published.changes_seq >= state.changes_seen
                    and published != state.manifest
                    and not {published.generation, published.l0} & self._broken
                    and self._valid(published)
                ):
                    self._manifest_sig = None
                    return False  # someone published at least as much: switch to it
                # Freeze the delta: new chunks go to a new one, so the frozen postings
                # can be read below without any lock while searches and catch-ups go on.
                with self._lock:
                    frozen = state.freeze(l0_fraction=L0_FRACTION, prefer_l0=prefer_l0)
            full = full or frozen.full_due
            background = threading.current_thread() is self._merger
            self._publishing = True
            try:
                manifest = write_generation(
                    folder,
                    frozen,
                    full=full,
                    store=self._store,
                    analyzer=self._analyzer.name,
                    cancelled=self._cancel.is_set if full and background else None,
                )
            except BaseException:
                self._end_publishing(state)
                raise
        self._merge_failed_at = None
        try:
            if not self._closing:
                fresh = self._open(manifest)
                if fresh is not None and not self._carry(state, frozen.deltas, fresh):
                    self._adopt(fresh)
        finally:
            self._end_publishing(state)
            self._manifest_sig = None
        return True

    def _end_publishing(self, state: State) -> None:
        """After a merge of ``state``'s frozen deltas, switched to or failed: nothing
        reads its removals any more, and this process polls the manifest again."""
        with self._lock:
            state.removed_since = None
        self._publishing = False

    def _carry(self, held: State, frozen: list[Delta], fresh: State) -> bool:
        """Switch to ``fresh``, the generation just published from ``held``'s ``frozen``
        deltas, taking over ``held``'s live delta: what was tokenised while the merge ran
        (a bulk ingest goes on meanwhile) is not tokenised again, as :meth:`_adopt` would.
        ``fresh`` gets the tombstones of the published chunks removed since the freeze.
        False when ``held`` is no longer what searches use or another merge froze it
        since (the caller then catches ``fresh`` up from SQLite)."""
        with self._sync, self._lock:
            removed = held.removed_since
            if (
                self._closing
                or self._state is not held
                or removed is None
                or held.frozen != frozen  # (deltas compare by identity)
            ):
                return False
            for rowid in removed:
                fresh.remove(rowid)  # its delta is still empty: the published parts
            fresh.take_over(held)
            # Always better than ``held`` (the same delta, without the frozen ones), even
            # when tombstones are due for compaction: the delta gathers them by itself
            # during an ingest (each new event changes its predecessor's context).
            self._state = fresh
        return True

    # -- catching up --------------------------------------------------------------------
    #
    # Lock order (docs/architecture.md): ``_sync`` (one catch-up at a time), then the
    # database's lock to *read* what changed, released before ``_lock`` is taken to
    # *apply* it. Nothing holding ``_lock`` touches the database, and a thread that
    # already holds the database's lock (inside a transaction) never waits for
    # ``_sync``: it serves the index as it is. A merge takes the folder's build lock
    # (a file lock) before ``_sync``, never the other way round. A merge in the
    # foreground first joins a background one (``_merger``) holding none of these, and
    # never from inside a transaction (``held_by_me``): the joined thread may need them.

    def _catch_up(self, *, merge: bool = True) -> None:
        if self._db.held_by_me():
            return  # inside the caller's transaction: uncommitted rows may roll back
        with self._sync:
            self._poll_base()
            self._catch_up_serialised()
        if merge:
            self._maybe_merge()

    def _catch_up_serialised(self) -> None:
        while True:
            state = self._state
            read = self._read_changes(state)
            if read is None:
                return
            if self._apply(state, read):
                return

    def _read_changes(self, state: State) -> Changes | None:
        """What to apply to ``state`` (:func:`read_changes`), or None when up to date."""
        return read_changes(
            self._db,
            self._source,
            state,
            dirty=lambda: state is self._state and self._dirty,
            lock=self._lock,
            page=READ_PAGE,
        )

    def _apply(self, state: State, read: Changes) -> bool:
        """Apply a read to ``state``; False when there is more to read (the rest of a
        backlog, or everything again after a compaction)."""
        version, newest, logged, rows, more = read
        background = threading.current_thread() in (self._builder, self._merger)
        with self._lock:
            for rowid, _op in logged:
                state.remove(int(rowid))
        # Tokenise a batch outside the index lock (searches go on), apply it under it.
        pause = self._pause if background else None
        for start in range(0, len(rows), APPLY_BATCH):
            batch = self._analyzer.analyse(rows[start : start + APPLY_BATCH], pause)
            if batch is None:
                return True  # closing
            with self._lock:
                state.add_batch(batch)
        with self._lock:
            state.changes_seen = newest
            if state.compact_soon() and self._folder is None:
                state.reset()  # compact the tombstones: read everything again
                return False
            if more:
                return False  # the next page: up to date only after the last one
            state.data_version = version
            if state is self._state:
                self._dirty = False
            state.ready = True
            return True

    def _pause(self) -> bool:
        """Hand the GIL to searching threads between chunks; True when closing."""
        time.sleep(0)
        return self._closing

    # -- searching ----------------------------------------------------------------------

    def search(
        self, query: str, k: int, *, where: VectorFilter | None = None
    ) -> list[tuple[int, float]]:
        """``(chunk_rowid, bm25)`` best first, higher is better (FTS5's ``-bm25``)."""
        terms = self.query_terms(query)
        self._catch_up()
        with self._lock:
            if not terms or k <= 0:
                return []
            return self._state.score(terms, k, where)

    def search_terms(
        self,
        terms: Sequence[str],
        weights: Sequence[float],
        k: int,
        *,
        where: VectorFilter | None = None,
    ) -> list[tuple[int, float]]:
        """Like :meth:`search` for index terms (stemmed, e.g. from :meth:`query_terms`),
        each term's contribution scaled by its weight (positive): the feedback pass's
        query (mindfile.retrieve.feedback)."""
        if len(terms) != len(weights) or any(not w > 0 for w in weights):
            raise ValueError("one positive weight per term")
        self._catch_up()
        with self._lock:
            if not terms or k <= 0:
                return []
            return self._state.score(list(terms), k, where, weights)

    def common_words(self, words: Sequence[str], share: float) -> set[str]:
        """The query ``words`` (unstemmed, as FTS5 takes them) that more than ``share``
        of the documents this index holds contain."""
        stems = [self._analyzer.stem(w) or "" for w in words]
        with self._lock:
            docs = self._state.docs
            counts = self._state.postings(stems)
        return {w for w, n in zip(words, counts, strict=True) if n > share * docs}

    def postings(self, terms: Sequence[str]) -> list[int]:
        """How many postings scoring each of the index ``terms`` would read (as the
        index stands, without catching up)."""
        with self._lock:
            return self._state.postings(terms)

    def held_through(self) -> int | None:
        """The newest chunk id the index holds when it is searchable without catching up
        (a published base mapped, or built), else None: what :meth:`search_held` covers
        while a backlog waits (chunks above it, e.g. the end of a bulk ingest, are not
        in it). Only for published indexes: their scores are FTS5's ``bm25()``, so the
        chunks above can be ranked by FTS5 on the same scale."""
        state = self._state
        if self._folder is None or (not state.ready and state.base is None):
            return None
        return state.max_rowid

    def search_held(
        self, query: str, k: int, *, where: VectorFilter | None = None
    ) -> tuple[list[tuple[int, float]], int]:
        """:meth:`search` over what the index holds now, without catching up, and the
        newest chunk id that covers (read from the same state: a background switch to a
        newer one between two calls cannot make the caller rank a chunk twice)."""
        terms = self.query_terms(query)
        with self._lock:
            state = self._state
            if not terms or k <= 0:
                return [], state.max_rowid
            return state.score(terms, k, where), state.max_rowid
