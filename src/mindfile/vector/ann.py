"""Shared machinery of the on-disk ANN indexes (``zvec``, ``lancedb``): a base and a delta.

Both are derived from ``chunks_vec`` like every index (see :mod:`mindfile.vector.base`);
the layout, the lifecycle and the concurrency rules are in docs/vector-indexes.md. In
short:

* **Base**: an immutable, published *generation* of an on-disk ANN index in
  ``<store file>.index/<backend>/``, shared (memory-mapped) by every process.
  ``manifest.json`` says which generation is current and what it holds: the store it
  was built from, the model and dimensions, the highest chunk id it read (``max_id``)
  and the ``chunks_vec_changes`` sequence it is current to (``changes_seq``). It is
  replaced by writing a new generation and renaming a new manifest over the old one.
* **Delta**: per process, in memory, exact. The vectors the base does not have right:
  ids above ``max_id``, and ids logged since ``changes_seq`` (re-read from SQLite). The
  logged ids at or below ``max_id`` are *tombstones*: the index excludes them inside its
  own search (a filter on the ``rowid`` field), and the delta holds their current
  vector, if they still have one.
* **Merge**: when the delta grows past a threshold, one process (a file lock decides
  which) folds it into a new generation, off the database lock and, by default, in a
  background thread. Until it is published, searches use the old base plus the delta:
  results never wait for a build and never miss a change.

A search asks the base for candidates (session and rowid filters applied inside the
index), searches the delta exactly, and rescores the base's candidates with the
float32 vectors read back from SQLite, so scores are exact cosines and a candidate that
no longer exists (or no longer passes the filter) is dropped. With no usable base (not
built yet, corrupt, another model) every vector is in the delta: the index is exact.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from mindfile.embed.base import Vector
from mindfile.errors import ConfigError
from mindfile.storage.db import Database
from mindfile.storage.index_source import index_source
from mindfile.vector.ann_delta import Delta
from mindfile.vector.ann_disk import (
    BUILD_LOCK,
    MANIFEST,
    Manifest,
    RowBatch,
    file_lock,
    index_root,
    read_after,
    read_ids,
    session_key,
    store_id,
)
from mindfile.vector.base import VectorFilter, ascending, changes_since, members, row_dots

__all__ = ["AnnBackend", "AnnIndex", "Manifest", "RowBatch", "index_root", "session_key"]

logger = logging.getLogger("mindfile")

#: Seconds before a merge that failed is tried again (searches stay exact meanwhile).
RETRY_AFTER = 30.0
#: Rows read from SQLite per batch while building (each batch under the database lock).
READ_BATCH = 4096
#: Rows a catch-up reads at a time. The database lock is held for one page, not for the
#: whole backlog: a process whose delta is far behind the published base (a publisher's
#: vector merge still running at 1M chunks) read 152k rows in 13.4 s in one piece,
#: while every other thread of the process waited for the lock. With 60k rows behind,
#: another thread's longest wait was 338 ms in one piece, 71 ms with pages of 1,024,
#: and the catch-up itself took 202 ms instead of 342 (benchmarks/catch_up.py).
CATCH_UP_PAGE = 1024
#: Pages :meth:`AnnIndex.follow` reads after one write beyond the rows it wrote: the
#: writer goes on, and the rest of a backlog is read over the next writes or by the
#: next search.
FOLLOW_PAGES = 2
#: Candidates a search asks of the base beyond the ones it wants when the delta holds
#: tombstones (rows the base holds stale), so that dropping them afterwards leaves enough
#: (at least this many more, or twice as many, and no more than there are tombstones).
TOMBSTONE_SLACK = 16


class BaseReader:
    """An open, read-only published generation. Subclasses implement the search."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self._users = 0
        self._retired = False
        self._guard = threading.Lock()

    def candidates(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        *,
        session_keys: Sequence[int] | None,
        rowids: npt.NDArray[np.int64] | None,
        exclude: Sequence[int],
    ) -> list[int]:
        """Up to ``k`` chunk ids nearest to ``query`` passing the filters (``rowids``:
        the allowed ones, ascending), best first."""
        raise NotImplementedError

    def count_present(self, rowids: Sequence[int]) -> int:
        """How many of ``rowids`` this generation holds."""
        raise NotImplementedError

    #: True when the base is exact: :meth:`scored_candidates` gives final scores, and
    #: nothing is rescored from SQLite.
    scored = False

    def scored_candidates(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        *,
        session_keys: Sequence[int] | None,
        rowids: Sequence[int] | npt.NDArray[np.int64] | None,
        exclude: Sequence[int],
    ) -> list[tuple[int, float]]:
        """The top ``k`` ``(chunk id, cosine)`` passing the filters (exact bases only)."""
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError

    # Searches of other threads may still use a reader that was replaced: it is closed
    # when the last one is done.
    def acquire(self) -> None:
        with self._guard:
            self._users += 1

    def release(self) -> None:
        with self._guard:
            self._users -= 1
            done = self._retired and self._users == 0
        if done:
            self._close()

    def retire(self) -> None:
        with self._guard:
            self._retired = True
            done = self._users == 0
        if done:
            self._close()


class AnnBackend:
    """What a concrete on-disk index provides: build, merge, open, collect garbage."""

    name = "ann"

    def build(self, folder: Path, generation: str, batches: Iterator[RowBatch]) -> tuple[str, int]:
        """Build a new generation from every row: its id and how many vectors it holds."""
        raise NotImplementedError

    def merge(
        self,
        folder: Path,
        base: Manifest,
        generation: str,
        deletes: Sequence[int],
        batches: Iterator[RowBatch],
    ) -> tuple[str, int]:
        """A new generation: ``base`` without ``deletes``, with ``batches`` upserted (its
        id and how many vectors it holds)."""
        raise NotImplementedError

    def open(self, folder: Path, manifest: Manifest) -> BaseReader:
        """Open a published generation read-only (raises when it is damaged)."""
        raise NotImplementedError

    def collect(self, folder: Path, keep: Manifest | None) -> None:
        """Remove what no published generation and no reader needs any more."""


class AnnIndex:
    """A :class:`~mindfile.vector.VectorIndex` over an on-disk ANN base plus an exact delta.

    Subclasses set :attr:`backend`. Class attributes tune merging (tests lower them):
    a merge starts when the delta holds more than
    ``max(min_delta, delta_fraction * base count)`` rows and tombstones, in a background
    thread when :attr:`background` is true.
    """

    name = "ann"
    min_delta = 1024
    delta_fraction = 0.02
    background = True
    #: Candidates asked of the base: ``candidate_factor * k + margin``, all rescored
    #: exactly (more than ``k`` lets the rescoring fix the index's approximate order).
    candidate_factor = 1.0
    margin = 8

    def __init__(self, db: Database, dims: int, backend: AnnBackend) -> None:
        if db.readonly:
            raise ConfigError(f"vector_index={self.name!r} needs a writable store")
        self._db = db
        self._source = index_source(db)
        self._dims = dims
        self._backend = backend
        self._lock = threading.Lock()
        self._merge_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._store, self._model = self._identity()
        root, self._temporary = index_root(db)
        self.folder = root / backend.name  # made by the first merge
        self._manifest_path = self.folder / MANIFEST
        self._manifest_sig: tuple[int, int, int] | None = None
        self._reader: BaseReader | None = None
        self._delta = Delta(dims, None)
        self._data_version: tuple[int, int] | None = None
        self._dirty = True
        self._want_merge = False
        self._force_full = False
        self._failed_at: float | None = None
        self._closed = False

    def _identity(self) -> tuple[str, str]:
        """The store's id for the manifests (made once) and its embedding model."""
        store = store_id(self._db)
        model = self._source.embedding_model()
        return str(store), str(model or "")

    # -- the published base ---------------------------------------------------------------

    def _valid(self, manifest: Manifest | None) -> bool:
        """Whether a manifest fits this store, model and size, and is not from its future
        (a store file restored from a backup, or replaced, makes its index stale)."""
        if manifest is None:
            return False
        if (manifest.backend, manifest.store, manifest.model, manifest.dims) != (
            self._backend.name,
            self._store,
            self._model,
            self._dims,
        ):
            return False
        high = self._source.chunk_id_high()
        newest, _ = changes_since(self._db, None)
        return manifest.max_id <= high and manifest.changes_seq <= newest

    def _poll_manifest(self) -> bool:
        """Switch to a newly published generation; True when the base changed."""
        try:
            st = os.stat(self._manifest_path)
            sig: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            sig = None
        if sig == self._manifest_sig:
            return False
        self._manifest_sig = sig
        manifest = Manifest.load(self._manifest_path) if sig is not None else None
        current = self._reader.manifest if self._reader is not None else None
        if manifest == current:
            return False
        reader: BaseReader | None = None
        if self._valid(manifest):
            assert manifest is not None
            try:
                reader = self._backend.open(self.folder, manifest)
            except FileNotFoundError:
                # Another process may have published a newer generation and removed
                # this one between our reading the manifest and opening it.
                newer = Manifest.load(self._manifest_path)
                if newer != manifest and self._valid(newer):
                    assert newer is not None
                    manifest = newer
                    with contextlib.suppress(Exception):
                        reader = self._backend.open(self.folder, newer)
                if reader is None:
                    logger.warning("vector index %s lost its generation; rebuilding", self.folder)
                    self._force_full = True
                    self._want_merge = True
            except Exception as exc:  # a damaged generation: serve exactly, rebuild it
                logger.warning("vector index %s is damaged (%s); rebuilding", self.folder, exc)
                self._force_full = True
                self._want_merge = True
        elif manifest is not None:
            self._force_full = True
            self._want_merge = True
        self._swap(reader)
        if reader is not None:
            # Generations nobody needs any more go now, unless a merge is running.
            with file_lock(self.folder / BUILD_LOCK, blocking=False) as got:
                if got:
                    self._backend.collect(self.folder, reader.manifest)
        return True

    def _swap(self, reader: BaseReader | None) -> None:
        old, self._reader = self._reader, reader
        if old is not None:
            old.retire()
        held = self._delta
        self._delta = Delta(self._dims, reader.manifest if reader is not None else None)
        if reader is not None:
            self._carry(held)
        self._dirty = True

    def _carry(self, held: Delta) -> None:
        """Keep the rows ``held`` (the delta before a switch to a newer base) has beyond
        the new base, instead of reading them from SQLite again.

        Right after a bulk ingest a searching process switches to each generation the
        publisher puts out; reading every row above it again (up to tens of thousands,
        ~25 us each) made one search take 100-300 ms (benchmarks/README.md). Only when
        ``held`` knows at least the log the base was built from, and holds every row
        above the new base (its own base was not newer): then the rows above are current
        as of ``held.seq``, and what changed since the base's log position among the rows
        the base holds is tombstoned and read again, as a fresh delta's catch-up would.
        Caller holds the database's lock and this index's."""
        fresh = self._delta
        base = fresh.base
        assert base is not None
        below = held.base.max_id if held.base is not None else 0
        if held.seq is None or held.seq < base.changes_seq or below > base.max_id:
            return
        if held.max_id <= base.max_id:
            return  # nothing above the new base to keep
        _, changed = changes_since(self._db, base.changes_seq)
        if changed is None:
            return  # the log was pruned: the catch-up starts afresh
        fresh.take_above(held, base.max_id)
        self._reread(fresh, [r for r in changed if r <= base.max_id])
        fresh.seq = held.seq

    def _reread(self, delta: Delta, logged: list[int]) -> None:
        """Rows the change log names that ``delta`` already covers (rewritten or
        deleted since): the base's copies tombstoned, the current vectors read into
        ``delta``, the deleted ones dropped from it. Caller holds the database's lock."""
        if not logged:
            return
        base_max = delta.base.max_id if delta.base is not None else 0
        delta.tombstones.update(r for r in logged if r <= base_max)
        current = read_ids(self._db, logged, self._dims)
        delta.put(current)
        present = set(current.ids.tolist())
        delta.drop([r for r in logged if r not in present])

    # -- catching up ----------------------------------------------------------------------

    def invalidate(self) -> None:
        self._dirty = True

    def _catch_up(self, pages: int | None = None) -> None:
        """Catch up with the committed rows, :data:`CATCH_UP_PAGE` new rows at a time,
        each page under the database lock and none across pages (at most ``pages`` of
        them; all by default). Between pages the delta is a correct index of an earlier
        state: it holds every row up to its ``max_id`` as of its ``seq``."""
        read = 0
        while True:
            with self._db.lock, self._lock:
                if self._catch_up_locked(CATCH_UP_PAGE):
                    return
            read += 1
            if pages is not None and read >= pages:
                return
            self._between_pages()

    @staticmethod
    def _between_pages() -> None:
        """Let the threads waiting for the database lock run (tests hook it)."""
        time.sleep(0)

    def follow(self, written: int = 0) -> None:
        """Catch up with what this process just committed (``written`` rows). The writing
        engine calls it after each write of a bulk ingest while the publisher process
        runs (which publishes the generations: no merge starts here). The rows are read
        a batch at a time while they are in the page cache, instead of all at the first
        search after the ingest (up to a quarter of the base since the last published
        generation). At most the pages ``written`` fills plus :data:`FOLLOW_PAGES`: a
        backlog the process did not write (a base far behind) is read over the next
        writes, not inside one."""
        if not self._db.held_by_me():
            self._catch_up(-(-max(written, 0) // CATCH_UP_PAGE) + FOLLOW_PAGES)

    def _catch_up_locked(self, limit: int | None = None) -> bool:
        """One step of a catch-up (at most ``limit`` new rows); False when there are
        more rows to read. Caller holds the database's lock and this index's."""
        if self._closed:
            raise ConfigError("the vector index is closed")
        if self._db.in_write_transaction:
            return True  # serve the last committed state: uncommitted rows may roll back
        changed_base = self._poll_manifest()
        version = self._db.change_token()
        if not (self._dirty or changed_base) and version == self._data_version:
            return True
        delta = self._delta
        seen, changed = changes_since(self._db, delta.seq)
        if changed is None:  # the log was pruned past what we hold: no base is usable
            if self._reader is not None:
                self._force_full = True
            self._swap(None)
            delta = self._delta
            seen, changed = changes_since(self._db, None)
        before = delta.max_id
        fresh = read_after(self._db, before, self._dims, limit)
        delta.put(fresh)
        # Rows logged above ``before`` are read as they are now, in this page or a later
        # one: only those the delta held already are read again.
        self._reread(delta, [r for r in changed or () if r <= before])
        delta.seq = seen
        if limit is not None and len(fresh) >= limit:
            return False
        self._data_version = version
        self._dirty = False
        base_count = delta.base.count if delta.base is not None else 0
        threshold = max(self.min_delta, int(self.delta_fraction * base_count))
        if delta.pending() > threshold or (delta.base is None and len(delta) > threshold):
            self._want_merge = True
        return True

    @staticmethod
    def deferred() -> bool:
        """Whether another process publishes for this one now (the bulk ingest's
        publisher, mindfile._publish, set by the engine): no merge of our own then."""
        return False

    def _after_catch_up(self) -> None:
        """Start (or, when not in the background, run) a merge the catch-up asked for.
        Never under the database lock: a merge reads SQLite in batches of its own."""
        if not self._want_merge or self._db.held_by_me() or self._closed or self.deferred():
            return
        if self._failed_at is not None and time.monotonic() - self._failed_at < RETRY_AFTER:
            return
        if self.background:
            with self._merge_lock:
                if self._thread is not None and self._thread.is_alive():
                    return
                self._want_merge = False
                self._thread = threading.Thread(
                    target=self._merge_quietly, name=f"mindfile-{self.name}-merge", daemon=True
                )
                self._thread.start()
        else:
            self._want_merge = False
            self.merge()

    def _merge_quietly(self) -> None:
        try:
            self.merge(blocking=False)
        except Exception:  # logged; searches stay exact through the delta
            self._failed_at = time.monotonic()
            logger.exception("merging vector index %s failed", self.folder)

    # -- merging --------------------------------------------------------------------------

    def merge(self, *, full: bool = False, blocking: bool = True) -> bool:
        """Fold the delta into a new published generation (or build one from scratch).

        Takes the folder's build lock (one builder per machine); with ``blocking=False``
        returns False at once when another process holds it. Never call it holding the
        database lock.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        with file_lock(self.folder / BUILD_LOCK, blocking=blocking) as got:
            if not got:
                return False
            self._merge_locked(full or self._force_full)
        with self._lock:
            self._dirty = True
        return True

    def _merge_locked(self, full: bool) -> None:
        manifest = Manifest.load(self._manifest_path)
        with self._db.lock:
            valid = self._valid(manifest)
        if full or not valid:
            manifest = None
        generation = uuid.uuid4().hex[:12]
        deletes: list[int] = []
        if manifest is not None:
            with self._db.lock:
                high = self._source.chunk_id_high()  # first: see _Reads
                newest, changed = changes_since(self._db, manifest.changes_seq)
            if changed is None:
                manifest = None
            else:
                deletes = [r for r in changed if r <= manifest.max_id]
        if manifest is None:
            with self._db.lock:
                high = self._source.chunk_id_high()
                newest, _ = changes_since(self._db, None)
        after = manifest.max_id if manifest else 0
        reads = _Reads(self._db, self._dims, after, deletes, upto=high)
        if self._stop.is_set():
            return
        try:
            if manifest is not None:
                try:
                    gen, count = self._backend.merge(
                        self.folder, manifest, generation, deletes, reads.batches(self._stop)
                    )
                except _Stopped:
                    raise
                except Exception as exc:  # e.g. a damaged base: build from scratch instead
                    logger.warning("merging into %s failed (%s); rebuilding", self.folder, exc)
                    manifest = None
                    with self._db.lock:
                        high = self._source.chunk_id_high()
                        newest, _ = changes_since(self._db, None)
                    reads = _Reads(self._db, self._dims, 0, [], upto=high)
            if manifest is None:
                gen, count = self._backend.build(self.folder, generation, reads.batches(self._stop))
        except _Stopped:
            return
        kept_zeros = set() if manifest is None else set(manifest.zeros) - set(deletes)
        published = Manifest(
            backend=self._backend.name,
            store=self._store,
            model=self._model,
            dims=self._dims,
            generation=gen,
            max_id=max(reads.max_id, manifest.max_id if manifest else 0),
            changes_seq=newest,
            count=count,
            built_at=datetime.now(UTC).isoformat(timespec="seconds"),
            zeros=tuple(sorted(reads.zeros | kept_zeros)),
        )
        published.save(self._manifest_path)
        self._force_full = False
        self._backend.collect(self.folder, published)

    # -- the protocol ---------------------------------------------------------------------

    def purge(self) -> None:
        """After deletes: build the published base anew from the live vectors, so no
        file under the index folder keeps a deleted chunk's vector (an incremental merge
        may only tombstone it inside the ANN library's files). Waits for the build lock;
        costs a full build (benchmarks/README.md)."""
        if self.merge(full=True, blocking=True):
            self._catch_up()

    def rebuild(self) -> None:
        """Drop the published base and build a new one from ``chunks_vec``.

        Searches are exact (everything in the delta) from this call until the new base
        is published. The build runs here unless the caller holds the database lock or
        the index builds in the background; then it is started like a merge.
        """
        with self._db.lock, self._lock:
            self._swap(None)
            self._manifest_sig = None
            self._force_full = True
            self._want_merge = True
            self._catch_up_locked()
        if self._db.held_by_me() or self.background:
            self._after_catch_up()
            return
        self._want_merge = False
        self.merge(full=True)
        self._catch_up()

    def stats(self) -> dict[str, object]:
        """The published base this process reads (count, generation, what it was
        built with) and its in-memory delta (rows held, base rows tombstoned)."""
        with self._lock:
            reader, delta = self._reader, self._delta
            manifest = None if reader is None else reader.manifest
            return {
                "persisted": manifest is not None,
                "folder": str(self.folder),
                "base_count": 0 if manifest is None else manifest.count,
                "base_generation": None if manifest is None else manifest.generation,
                "delta": len(delta),
                "tombstones": len(delta.tombstones),
                "merging": self._thread is not None and self._thread.is_alive(),
            }

    def size(self) -> int:
        self._catch_up()
        self._after_catch_up()
        with self._lock:
            reader, delta = self._reader, self._delta
            if reader is not None:
                reader.acquire()
        try:
            held = 0
            if reader is not None:
                held = reader.manifest.count - reader.count_present(sorted(delta.tombstones))
            return held + len(delta)
        finally:
            if reader is not None:
                reader.release()

    def search(
        self, query: Vector, k: int, *, where: VectorFilter | None = None
    ) -> list[tuple[int, float]]:
        self._catch_up()
        self._after_catch_up()
        if k <= 0:
            return []
        if where is not None and (
            (where.session_ids is not None and not where.session_ids)
            or (where.rowids is not None and not len(where.rowids))
        ):
            return []
        q = np.asarray(query, dtype=np.float32)
        sessions = None if where is None else where.session_ids
        keys = None if sessions is None else [session_key(s) for s in sessions]
        # Sorted once: the delta, the readers and the rescoring test membership by binary
        # search (a preference leg's filter holds ~200k rowids at 1M chunks).
        rowids = None if where is None or where.rowids is None else ascending(where.rowids)
        with self._lock:
            reader, delta = self._reader, self._delta
            tombstones = sorted(delta.tombstones)
            if reader is not None:
                reader.acquire()
            hits = delta.search(q, k, keys, rowids)
        if reader is not None:
            try:
                if reader.scored:  # exact: its scores are final
                    base_hits = reader.scored_candidates(
                        q, k, session_keys=keys, rowids=rowids, exclude=tombstones
                    )
                else:
                    want = int(self.candidate_factor * k) + self.margin
                    ids = _live_candidates(reader, q, want, keys, rowids, tombstones)
            finally:
                reader.release()
            skip = {i for i, _ in hits}
            skip.update(tombstones)
            if reader.scored:
                hits.extend(h for h in base_hits if h[0] not in skip)
            else:
                fresh = list(dict.fromkeys([*ids, *reader.manifest.zeros]))
                hits.extend(self._rescore([i for i in fresh if i not in skip], q, sessions, rowids))
        hits.sort(key=lambda h: (-h[1], -h[0]))
        return hits[:k]

    def _rescore(
        self,
        ids: list[int],
        query: npt.NDArray[np.float32],
        sessions: Sequence[str] | None,
        rowids: npt.NDArray[np.int64] | None,
    ) -> list[tuple[int, float]]:
        """Exact scores from SQLite for the base's candidates; drop any that no longer
        exists or no longer passes the filter (``sessions``; ``rowids``, ascending)."""
        if not ids:
            return []
        if sessions is not None:
            with self._db.lock:
                rows = read_ids(self._db, ids, self._dims)
            found, matrix = rows.ids, rows.matrix
            wanted = set(sessions)
            keep = np.array([s in wanted for s in rows.sessions], dtype=np.bool_)
        else:  # the vectors alone: no join with the chunks' rows (~2x faster at 1M)
            found, matrix = self._source.vectors_of(ids, self._dims)
            keep = np.ones(len(found), dtype=np.bool_)
        if rowids is not None:
            keep &= members(found, rowids)
        scores = row_dots(matrix, query)
        return [(int(i), float(s)) for i, s, ok in zip(found, scores, keep, strict=True) if ok]

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        # A merge reads SQLite under the database lock: a caller holding it must not wait.
        if thread is not None and not self._db.held_by_me():
            thread.join()
        with self._lock:
            self._closed = True
            if self._reader is not None:
                self._reader.retire()
                self._reader = None
            self._delta = Delta(self._dims, None)
        if self._temporary:
            shutil.rmtree(self.folder.parent, ignore_errors=True)


def _live_candidates(
    reader: BaseReader,
    query: npt.NDArray[np.float32],
    want: int,
    keys: Sequence[int] | None,
    rowids: npt.NDArray[np.int64] | None,
    tombstones: list[int],
) -> list[int]:
    """The base's best ``want`` candidates that are not tombstoned (``tombstones``
    ascending).

    An exclusion inside the ANN library costs per excluded id on every search (zvec:
    ~2 ms per 1,000 ids at 117k chunks; benchmarks/README.md, "A store that keeps
    growing, part 2"), while tombstones are few next to the base and seldom among the
    best: ask for :data:`TOMBSTONE_SLACK` more without the exclusion and drop them, and
    only when too few are left ask again with it."""
    if not tombstones:
        return reader.candidates(query, want, session_keys=keys, rowids=rowids, exclude=())
    ask = want + min(len(tombstones), max(want, TOMBSTONE_SLACK))
    got = reader.candidates(query, ask, session_keys=keys, rowids=rowids, exclude=())
    found = np.asarray(got, dtype=np.int64)
    live = [int(i) for i in found[~members(found, np.asarray(tombstones, dtype=np.int64))]]
    if len(live) >= want or len(got) < ask:
        return live[:want]
    return reader.candidates(query, want, session_keys=keys, rowids=rowids, exclude=tombstones)


class _Stopped(Exception):
    """The index was closed during a merge: the partial generation is left unpublished."""


class _Reads:
    """The rows a merge folds in, read from SQLite in batches (each batch under the
    database lock, none across batches: what changes meanwhile is in the change log,
    newer than the sequence the new manifest records, and lands in the next delta).

    Only rows up to ``upto``, the highest chunk id just before the merge read the log:
    rows written while it reads (a bulk ingest goes on) have higher ids, and every delta
    reads them as new rows above the base. Read here too, they were logged after the
    base's position at ids it holds, so every process held them again as tombstones,
    excluded inside the ANN search at a cost per id (benchmarks/README.md, "A store
    that keeps growing, part 2"). ``upto`` is read before the log (each its own
    snapshot): a write committed between the two has ids above ``upto`` and is logged
    at or before the base's position, so it is neither in the base nor a tombstone,
    only a row above the base; read after it, it would be both."""

    def __init__(
        self, db: Database, dims: int, after: int, changed: list[int], *, upto: int
    ) -> None:
        self._db = db
        self._dims = dims
        self._after = after
        self._changed = changed
        self._upto = upto
        self.max_id = after
        self.zeros: set[int] = set()

    def batches(self, stop: threading.Event) -> Iterator[RowBatch]:
        for start in range(0, len(self._changed), READ_BATCH):
            if stop.is_set():
                raise _Stopped
            with self._db.lock:
                batch = read_ids(self._db, self._changed[start : start + READ_BATCH], self._dims)
            if len(batch):
                self._note_zeros(batch)
                yield batch
        cursor = self._after
        while cursor < self._upto:
            if stop.is_set():
                raise _Stopped
            with self._db.lock:
                batch = read_after(self._db, cursor, self._dims, READ_BATCH)
            if len(batch) and batch.ids[-1] > self._upto:
                batch = batch.head(int(np.searchsorted(batch.ids, self._upto, "right")))
            if not len(batch):
                break
            cursor = int(batch.ids[-1])
            self.max_id = max(self.max_id, cursor)
            self._note_zeros(batch)
            yield batch

    def _note_zeros(self, batch: RowBatch) -> None:
        self.zeros.update(batch.ids[~batch.matrix.any(axis=1)].tolist())
