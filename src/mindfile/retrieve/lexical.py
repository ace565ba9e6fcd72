"""BM25 over chunks, derived from SQLite like the vector index: a base published on
disk and memory-mapped by every process, plus each process's in-memory delta.

Why not rank with FTS5 itself? FTS5's ``bm25()`` costs a few microseconds per matching
row, so an OR query whose words are common scans tens of thousands of rows: 25-80 ms at
100k chunks on a laptop core. This index keeps postings as arrays and scores with numpy
(``bincount`` over the query terms' postings), typically well under a millisecond.

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
import dataclasses
import logging
import math
import os
import threading
import time
from array import array
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import cast

import apsw
import numpy as np
import numpy.typing as npt

from mindfile.retrieve.fts import COLUMN_WEIGHTS, query_words
from mindfile.retrieve.lexical_disk import Flat, LexManifest, Segment, collect, merge
from mindfile.storage.changes import bounds, read_since
from mindfile.storage.db import Database, Row
from mindfile.vector.ann_disk import BUILD_LOCK, MANIFEST, file_lock, index_root, store_id
from mindfile.vector.base import VectorFilter

__all__ = ["Bm25Index"]

K1 = 1.2
#: Chunks waiting to be indexed above which a search ranks with FTS5 while the index
#: catches up in the background (tokenising ~0.1 ms a chunk would block the search
#: longer than FTS5 takes to answer it).
BACKLOG = 2_000
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
B = 0.75
IDF_FLOOR = 1e-6
#: First delay before retrying a failed background build, and its cap (doubling).
RETRY_SECONDS = 1.0
RETRY_MAX_SECONDS = 300.0

logger = logging.getLogger("mindfile.retrieve")
_COLUMNS = "chunk_text, context_before, context_after"


class Bm25Index:
    """Exact BM25 (FTS5-compatible) over ``chunks``: a shared base plus a delta."""

    name = "memory"

    def __init__(
        self,
        db: Database,
        *,
        weights: tuple[float, float, float] = COLUMN_WEIGHTS,
        persist: bool = True,
    ) -> None:
        self._db = db
        self._weights = weights
        self._lock = threading.Lock()
        tokenizer = db.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
        self._tokenize = tokenizer
        self._stem = lru_cache(maxsize=65536)(self._stem_uncached)
        self._sync = threading.Lock()  # one catch-up at a time (see "catching up")
        self._builder: threading.Thread | None = None
        self._merger: threading.Thread | None = None
        self._closing = False
        self._failure: str | None = None
        self._failures = 0
        self._retry_at = 0.0
        self._merge_failed_at: float | None = None
        self._dirty = True
        self._state = _State(None)
        self._analyzer = f"fts5 porter unicode61 remove_diacritics 2; weights {list(weights)}"
        self._folder: Path | None = None
        self._store = ""
        self._manifest_sig: tuple[int, int, int] | None = None
        self._broken: set[str] = set()  # generations that failed to open
        if persist and not db.in_memory:
            root, temporary = index_root(db)
            store = store_id(db, create=not db.readonly)
            if not temporary and store is not None:
                self._folder, self._store = root / FOLDER, store

    # -- tokenizing ---------------------------------------------------------------------

    def _tokens(self, text: str) -> list[str]:
        if not text:
            return []
        out = self._tokenize(
            text.encode("utf-8", "replace"),
            apsw.FTS5_TOKENIZE_DOCUMENT,
            None,
            include_offsets=False,
            include_colocated=False,
        )
        # Without colocated tokens apsw returns plain strings.
        return cast("list[str]", out)

    def _stem_uncached(self, word: str) -> str | None:
        toks = self._tokens(word)
        return toks[0] if toks else None

    def query_terms(self, text: str) -> list[str]:
        """The stemmed, de-duplicated, stop-word-free terms of a query (as FTS5 sees them)."""
        stems = (self._stem(word) for word in query_words(text))
        return list(dict.fromkeys(s for s in stems if s))

    def _analyse(self, columns: Sequence[str]) -> tuple[dict[str, float], int]:
        """A chunk's column-weighted term frequencies and its length in tokens."""
        tf: dict[str, float] = {}
        length = 0
        for weight, text in zip(self._weights, columns, strict=True):
            tokens = self._tokens(text) if text else []
            length += len(tokens)
            for token, n in Counter(tokens).items():
                tf[token] = tf.get(token, 0.0) + weight * n
        return tf, length

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
        to be indexed (a bulk ingest): callers then rank with FTS5 and call :meth:`warm`.
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
        newest = int(self._db.scalar("SELECT coalesce(max(id), 0) FROM chunks"))
        return newest - state.max_rowid <= BACKLOG

    def warm(self) -> None:
        """Build or catch up in a background thread (one at a time); returns at once.

        The first build costs seconds at 100k chunks (tokenising every chunk and its
        context in Python), paid once per store: the result is published on disk for
        every later process. Meanwhile callers rank with FTS5. After a failed build the
        next attempt waits ``RETRY_SECONDS`` (doubling up to ``RETRY_MAX_SECONDS``).
        """
        if self._builder is not None or self._closing:
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
        newest = int(self._db.scalar("SELECT coalesce(max(id), 0) FROM chunks"))
        if newest - self._state.max_rowid >= MERGE_MIN:
            self.warm()

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
                self._state = _State(None)
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
        for thread in (self._builder, self._merger):
            if thread is not None and thread is not threading.current_thread():
                thread.join()
        with self._lock:
            self._state = _State(None)

    # -- the published base -------------------------------------------------------------

    def _valid(self, manifest: LexManifest | None) -> bool:
        """Whether a manifest fits this store and analyzer and is not from its future (a
        store file restored from a backup, or replaced, makes its base stale)."""
        if manifest is None or (manifest.store, manifest.analyzer) != (
            self._store,
            self._analyzer,
        ):
            return False
        with self._db.lock, self._db.snapshot():
            high = self._db.scalar("SELECT seq FROM sqlite_sequence WHERE name = 'chunks'")
            oldest, newest = bounds(self._db, "chunks_changes")
        # A base older than the change log's oldest entry cannot catch up (pruned).
        return (
            manifest.max_id <= int(high or 0)
            and manifest.changes_seq <= newest
            and manifest.changes_seq >= oldest - 1
        )

    def _poll_base(self) -> None:
        """Switch to a newly published base (a cheap ``stat`` when nothing changed).

        Called under ``_sync``. Before the first build the switch is immediate (the
        state is empty); afterwards a background thread catches the new base up to the
        present and swaps it in, so no search waits for the tokenising.
        """
        folder = self._folder
        if folder is None or self._ignore_published:
            return
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

    def _open(self, manifest: LexManifest) -> _State | None:
        """A state on a published base; None when it does not fit or cannot be read."""
        folder = self._folder
        assert folder is not None
        if not self._valid(manifest):
            return None
        try:
            return _State(manifest, [Segment(folder, *seg) for seg in manifest.segments()])
        except (OSError, ValueError) as exc:  # removed meanwhile, or damaged: rebuild
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

    def _adopt(self, fresh: _State) -> None:
        """Catch ``fresh`` (not yet visible) up to the present, then swap it in.

        Most of the catching up happens without ``_sync`` (searches go on with the old
        state); the last step, under it, applies what was written meanwhile."""
        for _ in range(3):
            read = self._read_changes(fresh)
            if read is None:
                break
            self._apply(fresh, *read)
        with self._sync:
            if self._closing:
                return
            while True:
                read = self._read_changes(fresh)
                if read is None or self._apply(fresh, *read):
                    break
            if fresh.compact_soon() or not fresh.ready:
                return  # no better than what we hold; the next merge fixes it
            with self._lock:
                self._state = fresh

    _want_merge = False

    def _maybe_merge(self) -> None:
        """Publish a new base in the background when the delta has grown enough."""
        if self._folder is None or self._closing or self._db.readonly:
            return
        state = self._state
        if not state.ready or self._merger is not None:
            return
        l0_docs = len(state.l0.seg) if state.l0 is not None else 0
        held = state.delta.n_alive + state.delta.dead
        big = held >= max(MERGE_MIN, int(MERGE_FRACTION * l0_docs))
        if not (big or state.compact_soon() or self._want_merge):
            return
        failed = self._merge_failed_at
        if failed is not None and time.monotonic() - failed < RETRY_MAX_SECONDS:
            return
        with self._lock:
            if self._merger is not None:
                return
            self._want_merge = False
            self._merger = threading.Thread(
                target=self._merge_in_background, name="mindfile-bm25-merge", daemon=True
            )
            self._merger.start()

    def _merge_in_background(self) -> None:
        try:
            self._merge(force=False)
        except Exception:  # logged; searches stay exact on the base and deltas held
            self._merge_failed_at = time.monotonic()
            logger.exception("publishing the BM25 index in %s failed", self._folder)
        finally:
            self._merger = None

    def merge(self) -> bool:
        """Publish this process's index as one new base now (waits for the build lock).

        Returns False when there is nothing to publish (in-memory store, read-only, not
        built). Normally automatic (and cheaper: small L0 generations, see
        ``MERGE_MIN``, ``MERGE_FRACTION`` and ``L0_FRACTION``).
        """
        return self._merge(force=True, blocking=True, full=True)

    def _merge(self, *, force: bool, blocking: bool = False, full: bool = False) -> bool:
        """Publish what this process holds: as a new L0 generation (cost: the L0 and the
        delta) or, when the L0 reaches ``L0_FRACTION`` of the base, tombstones pile up,
        or ``full``, as a new base (cost: everything)."""
        folder = self._folder
        if folder is None or self._db.readonly or self._db.held_by_me():
            return False
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
                    state.frozen.append(state.delta)
                    state.delta = _Delta()
                    frozen = list(state.frozen)
                    alive = [np.frombuffer(d.alive, dtype=np.int8).astype(bool) for d in frozen]
                    base, l0 = state.base, state.l0
                    base_alive = base.alive.copy() if base is not None else None
                    l0_alive = l0.alive.copy() if l0 is not None else None
                    recent = sum(d.n_alive for d in frozen) + (l0.n_alive if l0 else 0)
                    full = (
                        full
                        or base is None
                        or state.manifest is None
                        or recent >= L0_FRACTION * base.n_alive
                        or base.dead > max(1024, len(base.seg) // 4)
                    )
                    max_id, changes = state.max_rowid, state.changes_seen
                    old = state.manifest
            flats = [d.flat(a) for d, a in zip(frozen, alive, strict=True)]
            built = datetime.now(UTC).isoformat(timespec="seconds")
            if full:
                if l0 is not None:
                    assert l0_alive is not None
                    flats.insert(0, l0.seg.flat(l0_alive))
                gen, docs, postings, total = merge(
                    folder, base.seg if base else None, base_alive, _combine(flats)
                )
                manifest = LexManifest(
                    store=self._store,
                    analyzer=self._analyzer,
                    generation=gen,
                    max_id=max_id,
                    changes_seq=changes,
                    docs=docs,
                    postings=postings,
                    total_len=total,
                    built_at=built,
                )
            else:
                assert base is not None and base_alive is not None and old is not None
                dead = np.asarray(base.seg.doc_rowid)[~base_alive]
                gen, docs, postings, total = merge(
                    folder, l0.seg if l0 else None, l0_alive, _combine(flats), dead=dead
                )
                manifest = dataclasses.replace(
                    old,
                    max_id=max_id,
                    changes_seq=changes,
                    built_at=built,
                    l0=gen,
                    l0_docs=docs,
                    l0_postings=postings,
                    l0_total_len=total,
                )
            manifest.save(folder / MANIFEST)
            collect(folder, keep=[manifest.generation, manifest.l0])
        self._merge_failed_at = None
        if not self._closing:
            fresh = self._open(manifest)
            if fresh is not None:
                self._adopt(fresh)
            self._manifest_sig = None
        return True

    # -- catching up --------------------------------------------------------------------
    #
    # Lock order (docs/architecture.md): ``_sync`` (one catch-up at a time), then the
    # database's lock to *read* what changed, released before ``_lock`` is taken to
    # *apply* it. Nothing holding ``_lock`` touches the database, and a thread that
    # already holds the database's lock (inside a transaction) never waits for
    # ``_sync``: it serves the index as it is. A merge takes the folder's build lock
    # (a file lock) before ``_sync``, never the other way round.

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
            if self._apply(state, *read):
                return

    def _read_changes(
        self, state: _State
    ) -> tuple[tuple[int, int], int, list[Row], list[Row]] | None:
        """``(token, newest_seq, logged, rows)`` to apply to ``state``, or None when it is
        up to date."""
        with self._db.lock:
            if self._db.in_write_transaction:
                return None
            version = self._db.change_token()
            current = state is self._state
            if version == state.data_version and not (current and self._dirty):
                return None
            with self._db.snapshot():
                fresh = state.max_rowid == 0 and state.base is None
                seen = None if fresh else state.changes_seen
                newest, logged = read_since(self._db, "chunks_changes", seen, "chunk_rowid, op")
                if logged is None:  # the log was pruned past what we saw: reload everything
                    with self._lock:
                        state.reset()
                    logged = []
                reread = sorted(
                    {int(r) for r, op in logged if op == "u" and int(r) <= state.max_rowid}
                )
                rows = self._db.query(
                    f"SELECT id, session_id, {_COLUMNS} FROM chunks WHERE id > ? ORDER BY id",
                    (state.max_rowid,),
                )
                if reread:
                    rows += self._db.query(
                        f"SELECT id, session_id, {_COLUMNS} FROM chunks "
                        "WHERE id IN (SELECT value FROM json_each(?))",
                        (f"[{','.join(map(str, reread))}]",),
                    )
        return version, newest, logged, rows

    def _apply(
        self,
        state: _State,
        version: tuple[int, int],
        newest: int,
        logged: list[Row],
        rows: list[Row],
    ) -> bool:
        """Apply a read to ``state``; False when a compaction needs a re-read."""
        background = threading.current_thread() in (self._builder, self._merger)
        with self._lock:
            for rowid, _op in logged:
                state.remove(int(rowid))
        # Tokenise a batch outside the index lock (searches go on), apply it under it.
        for start in range(0, len(rows), APPLY_BATCH):
            analysed: list[tuple[int, str, dict[str, float], int]] = []
            for i, (rowid, session_id, *columns) in enumerate(rows[start : start + APPLY_BATCH]):
                if i % 16 == 0 and background:
                    # Hand the GIL over often: a searching thread re-takes it after every
                    # SQLite step and would otherwise wait a whole switch interval each time.
                    time.sleep(0)
                    if self._closing:
                        return True
                analysed.append((int(rowid), str(session_id), *self._analyse(columns)))
            with self._lock:
                for rowid, session_id, tf, length in analysed:
                    state.add(rowid, session_id, tf, length)
                    state.max_rowid = max(state.max_rowid, rowid)
        with self._lock:
            state.changes_seen = newest
            if state.compact_soon() and self._folder is None:
                state.reset()  # compact the tombstones: read everything again
                return False
            state.data_version = version
            if state is self._state:
                self._dirty = False
            state.ready = True
            return True

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


class _Delta:
    """Postings held in this process's heap, appended to in place (``array`` keeps them
    compact). A delta being published is *frozen*: nothing is added to it any more, only
    its documents' alive flags change, so a merge can read its postings unlocked."""

    def __init__(self) -> None:
        self.term_ids: dict[str, int] = {}
        self.post_docs: list[array[int]] = []
        self.post_tf: list[array[float]] = []
        self.df: list[int] = []
        self.doc_rowid = array("q")
        self.doc_len = array("f")
        self.doc_session = array("i")
        self.doc_terms: list[array[int] | None] = []
        self.alive = array("b")
        self.doc_of: dict[int, int] = {}
        self.session_codes: dict[str, int] = {}
        self.n_alive = 0
        self.total_len = 0.0
        self.dead = 0

    def add(self, rowid: int, session_id: str, tf: dict[str, float], length: int) -> None:
        doc = len(self.doc_rowid)
        term_ids = self.term_ids
        tids = array("i")
        for token, freq in tf.items():
            tid = term_ids.get(token)
            if tid is None:
                tid = term_ids[token] = len(self.df)
                self.df.append(0)
                self.post_docs.append(array("i"))
                self.post_tf.append(array("f"))
            self.post_docs[tid].append(doc)
            self.post_tf[tid].append(freq)
            self.df[tid] += 1
            tids.append(tid)
        code = self.session_codes.setdefault(session_id, len(self.session_codes))
        self.doc_rowid.append(rowid)
        self.doc_len.append(float(length))
        self.doc_session.append(code)
        self.doc_terms.append(tids)
        self.alive.append(1)
        self.doc_of[rowid] = doc
        self.n_alive += 1
        self.total_len += length

    def remove(self, rowid: int) -> bool:
        doc = self.doc_of.pop(rowid, None)
        if doc is None:
            return False
        for tid in self.doc_terms[doc] or ():
            self.df[tid] -= 1
        self.doc_terms[doc] = None
        self.alive[doc] = 0
        self.n_alive -= 1
        self.total_len -= self.doc_len[doc]
        self.dead += 1
        return True

    def flat(self, alive: npt.NDArray[np.bool_]) -> Flat:
        """The postings in flat arrays (for a frozen delta: nothing appends meanwhile)."""
        counts = np.fromiter((len(p) for p in self.post_docs), np.int64, len(self.post_docs))
        doc = np.concatenate(
            [np.frombuffer(p, dtype=np.int32) for p in self.post_docs] or [np.zeros(0, np.int32)]
        )
        tf = np.concatenate(
            [np.frombuffer(p, dtype=np.float32) for p in self.post_tf] or [np.zeros(0, np.float32)]
        )
        sessions = list(self.session_codes)
        codes = np.frombuffer(self.doc_session, dtype=np.int32)
        return Flat(
            terms=list(self.term_ids),
            counts=counts,
            doc=doc,
            tf=tf,
            rowid=np.frombuffer(self.doc_rowid, dtype=np.int64).copy(),
            length=np.frombuffer(self.doc_len, dtype=np.float32).copy(),
            session=[sessions[c] for c in codes.tolist()],
            alive=alive,
        )

    def scored(
        self, term: str, idf: float, avgdl: float
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float64]] | None:
        tid = self.term_ids.get(term)
        if tid is None or self.df[tid] <= 0:
            return None
        docs = np.array(self.post_docs[tid], dtype=np.int32)
        freq = np.array(self.post_tf[tid], dtype=np.float64)
        lengths = np.frombuffer(self.doc_len, dtype=np.float32)[docs]
        norm = K1 * (1.0 - B + B * lengths / avgdl)
        return docs, idf * freq * (K1 + 1.0) / (freq + norm)

    def mask(self, where: VectorFilter | None) -> _Mask:
        if where is None:
            return None
        return _mask(
            where,
            self.session_codes,
            np.frombuffer(self.doc_session, dtype=np.int32),
            np.frombuffer(self.doc_rowid, dtype=np.int64),
        )


class _Published:
    """One published generation as this process sees it: the mapped arrays, and which
    of its documents are still alive here (tombstones are per process)."""

    def __init__(self, seg: Segment) -> None:
        self.seg = seg
        self.alive = np.ones(len(seg), dtype=bool)
        self.n_alive = len(seg)
        self.total = seg.total_len
        self.dead = 0

    def kill(self, at: int) -> None:
        if self.alive[at]:
            self.alive[at] = False
            self.n_alive -= 1
            self.total -= float(self.seg.doc_len[at])
            self.dead += 1

    def remove(self, rowid: int) -> bool:
        at = self.seg.doc_of(rowid)
        if at is None or not self.alive[at]:
            return False
        self.kill(at)
        return True


class _State:
    """One consistent view of the index: the published generations (a base and maybe
    an L0, memory-mapped, shared with other processes) plus in-memory deltas of what
    came after them (new chunks, and chunks changed since, whose published copy is
    tombstoned): the live delta, and while a merge runs, the frozen one it publishes."""

    def __init__(self, manifest: LexManifest | None = None, segs: Sequence[Segment] = ()) -> None:
        self.manifest = manifest
        self.published = [_Published(seg) for seg in segs]
        if len(self.published) == 2:  # the L0 replaces or deletes some base chunks
            base, l0 = self.published
            for rowid in l0.seg.dead.tolist():
                base.remove(int(rowid))
        self.max_rowid = manifest.max_id if manifest is not None else 0
        self.changes_seen = manifest.changes_seq if manifest is not None else 0
        self.data_version: tuple[int, int] | None = None
        self.ready = False
        self.delta = _Delta()
        #: Deltas being published by a merge (normally none; one while a merge runs).
        self.frozen: list[_Delta] = []

    def reset(self) -> None:
        """Forget everything, the published generations too (then catch up from nothing)."""
        self.__dict__.update(_State().__dict__)

    def deltas(self) -> list[_Delta]:
        return [*self.frozen, self.delta]

    @property
    def base(self) -> _Published | None:
        return self.published[0] if self.published else None

    @property
    def l0(self) -> _Published | None:
        return self.published[1] if len(self.published) > 1 else None

    @property
    def published_docs(self) -> int:
        return sum(p.n_alive for p in self.published)

    @property
    def docs(self) -> int:
        """Live documents, published and in deltas."""
        return self.published_docs + self.delta_docs

    @property
    def delta_docs(self) -> int:
        return sum(d.n_alive for d in self.deltas())

    def add(self, rowid: int, session_id: str, tf: dict[str, float], length: int) -> None:
        self.remove(rowid)
        self.delta.add(rowid, session_id, tf, length)

    def remove(self, rowid: int) -> None:
        for delta in self.deltas():
            if delta.remove(rowid):
                return
        if self.manifest is None or rowid > self.manifest.max_id:
            return
        for pub in reversed(self.published):
            if pub.remove(rowid):
                return

    def compact_soon(self) -> bool:
        """Whether tombstones outnumber a quarter of the documents of a part."""
        delta = self.delta.dead > max(1024, len(self.delta.alive) // 4)
        return delta or any(p.dead > max(1024, len(p.seg) // 4) for p in self.published)

    # -- scoring ------------------------------------------------------------------------

    def score(
        self, terms: list[str], k: int, where: VectorFilter | None
    ) -> list[tuple[int, float]]:
        """The top ``k`` of all parts together, with the statistics of all."""
        n_alive = self.docs
        if n_alive == 0:
            return []
        deltas = self.deltas()
        total = sum(p.total for p in self.published) + sum(d.total_len for d in deltas)
        avgdl = total / n_alive
        pub_parts: list[list[tuple[npt.NDArray[np.int32], npt.NDArray[np.float64]]]] = [
            [] for _ in self.published
        ]
        delta_parts: list[list[tuple[npt.NDArray[np.int32], npt.NDArray[np.float64]]]] = [
            [] for _ in deltas
        ]
        for term in terms:
            found = [p.seg.postings(term) for p in self.published]
            n = 0
            for pub, hit in zip(self.published, found, strict=True):
                if hit is not None:
                    docs = np.asarray(hit[0])
                    n += int(np.count_nonzero(pub.alive[docs])) if pub.dead else len(docs)
            for delta in deltas:
                tid = delta.term_ids.get(term)
                n += delta.df[tid] if tid is not None else 0
            if n <= 0:
                continue
            idf = max(math.log((n_alive - n + 0.5) / (n + 0.5)), IDF_FLOOR)
            for pub, hit, parts in zip(self.published, found, pub_parts, strict=True):
                if hit is not None and len(hit[0]):
                    docs = np.asarray(hit[0])
                    freq = np.asarray(hit[1], dtype=np.float64)
                    norm = K1 * (1.0 - B + B * np.asarray(pub.seg.doc_len)[docs] / avgdl)
                    parts.append((docs, idf * freq * (K1 + 1.0) / (freq + norm)))
            for delta, parts in zip(deltas, delta_parts, strict=True):
                part = delta.scored(term, idf, avgdl)
                if part is not None:
                    parts.append(part)
        hits: list[tuple[int, float]] = []
        for pub, parts in zip(self.published, pub_parts, strict=True):
            if parts:
                seg = pub.seg
                mask = None
                if where is not None:
                    rowids = np.asarray(seg.doc_rowid)
                    mask = _mask(where, seg.session_codes, np.asarray(seg.doc_session), rowids)
                hits += _top(parts, len(seg), pub.alive, np.asarray(seg.doc_rowid), mask, k)
        for delta, parts in zip(deltas, delta_parts, strict=True):
            if parts:
                hits += _top(
                    parts,
                    len(delta.doc_rowid),
                    np.frombuffer(delta.alive, dtype=np.int8).astype(bool),
                    np.frombuffer(delta.doc_rowid, dtype=np.int64),
                    delta.mask(where),
                    k,
                )
        # Best first; equal scores: higher rowid (more recent) first, like the SQL legs.
        hits.sort(key=lambda h: (-h[1], -h[0]))
        return hits[:k]


#: A filter over one side's documents: (allowed session codes or None, each document's
#: session code, allowed rowids or None, each document's rowid); None = no filter.
_Mask = (
    tuple[
        npt.NDArray[np.int32] | None,
        npt.NDArray[np.int32],
        npt.NDArray[np.int64] | None,
        npt.NDArray[np.int64],
    ]
    | None
)


def _mask(
    where: VectorFilter,
    codes: dict[str, int],
    doc_session: npt.NDArray[np.int32],
    doc_rowid: npt.NDArray[np.int64],
) -> _Mask:
    sessions = None
    if where.session_ids is not None:
        wanted = [codes[s] for s in where.session_ids if s in codes]
        sessions = np.array(wanted, dtype=np.int32)
    return (sessions, doc_session, where.rowids, doc_rowid)


def _combine(flats: list[Flat]) -> Flat:
    """Several deltas' postings as one (their documents numbered one after another)."""
    if len(flats) == 1:
        return flats[0]
    offsets = np.cumsum([0] + [len(f.rowid) for f in flats])
    return Flat(
        terms=[t for f in flats for t in f.terms],
        counts=np.concatenate([f.counts for f in flats]),
        doc=np.concatenate([f.doc + np.int32(o) for f, o in zip(flats, offsets, strict=False)]),
        tf=np.concatenate([f.tf for f in flats]),
        rowid=np.concatenate([f.rowid for f in flats]),
        length=np.concatenate([f.length for f in flats]),
        session=[s for f in flats for s in f.session],
        alive=np.concatenate([f.alive for f in flats]),
    )


def _top(
    parts: list[tuple[npt.NDArray[np.int32], npt.NDArray[np.float64]]],
    n_docs: int,
    alive: npt.NDArray[np.bool_],
    rowids: npt.NDArray[np.int64],
    mask: _Mask,
    k: int,
) -> list[tuple[int, float]]:
    """The best ``k`` live, allowed documents of one side as ``(rowid, score)``."""
    all_docs = np.concatenate([d for d, _ in parts])
    weights = np.concatenate([s for _, s in parts])
    scores = np.bincount(all_docs, weights=weights, minlength=n_docs)
    # Every matching document scores > 0 (IDF is floored above zero).
    candidates = np.flatnonzero(scores > 0.0)
    keep = alive[candidates]
    if mask is not None:
        sessions, doc_session, allowed, doc_rowid = mask
        if sessions is not None:
            keep &= np.isin(doc_session[candidates], sessions)
        if allowed is not None:
            keep &= np.isin(doc_rowid[candidates], allowed)
    candidates = candidates[keep]
    if len(candidates) == 0:
        return []
    cand_scores = scores[candidates]
    if k < len(candidates):
        top = np.argpartition(-cand_scores, k - 1)[:k]
        # Every score tied with the k-th competes, so the top k does not depend on k.
        top = np.flatnonzero(cand_scores >= cand_scores[top].min())
    else:
        top = np.arange(len(candidates))
    found = rowids[candidates[top]]
    order = np.lexsort((-found, -cand_scores[top]))[:k]
    return [(int(found[i]), float(cand_scores[top][i])) for i in order]
