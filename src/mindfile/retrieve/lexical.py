"""An in-memory BM25 index over chunks, derived from SQLite like the vector index.

Why not rank with FTS5 itself? FTS5's ``bm25()`` costs a few microseconds per matching
row, so an OR query whose words are common scans tens of thousands of rows: 25-80 ms at
100k chunks on a laptop core. This index keeps postings in memory and scores with numpy
(``bincount`` over the query terms' postings), typically well under a millisecond.

It reproduces FTS5's ``bm25(chunks_fts, w_text, w_before, w_after)`` exactly: the same
tokenizer (FTS5's own ``porter unicode61 remove_diacritics 2``, called through apsw),
the same IDF (``log((N - n + 0.5) / (n + 0.5))``, floored at 1e-6), k1 = 1.2, b = 0.75,
per-column weighted term frequency and unweighted document length. A conformance test
compares it with FTS5 on the same store.

Catching up: new chunks are the ids above the highest held (ids only grow); updates of
indexed text and deletions are read from ``chunks_changes`` (triggers, migration 0001).
A document that changes is tombstoned and re-added; tombstones are compacted by a full
rebuild once they outnumber a quarter of the documents.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from array import array
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import cast

import apsw
import numpy as np
import numpy.typing as npt

from mindfile.retrieve.fts import COLUMN_WEIGHTS, query_words
from mindfile.storage.changes import read_since
from mindfile.storage.db import Database, Row
from mindfile.vector.base import VectorFilter

__all__ = ["Bm25Index"]

K1 = 1.2
#: Chunks waiting to be indexed above which a search ranks with FTS5 while the index
#: catches up in the background (instead of blocking for seconds).
BACKLOG = 20_000
B = 0.75
IDF_FLOOR = 1e-6
#: First delay before retrying a failed background build, and its cap (doubling).
RETRY_SECONDS = 1.0
RETRY_MAX_SECONDS = 300.0

logger = logging.getLogger("mindfile.retrieve")
_COLUMNS = "chunk_text, context_before, context_after"


class Bm25Index:
    """Exact BM25 (FTS5-compatible) over ``chunks`` with in-memory postings."""

    name = "memory"

    def __init__(
        self, db: Database, *, weights: tuple[float, float, float] = COLUMN_WEIGHTS
    ) -> None:
        self._db = db
        self._weights = weights
        self._lock = threading.Lock()
        tokenizer = db.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
        self._tokenize = tokenizer
        self._stem = lru_cache(maxsize=65536)(self._stem_uncached)
        self._sync = threading.Lock()  # one catch-up at a time (see "catching up")
        self._builder: threading.Thread | None = None
        self._closing = False
        self._failure: str | None = None
        self._failures = 0
        self._retry_at = 0.0
        self._reset()

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

    # -- state --------------------------------------------------------------------------

    def _reset(self) -> None:
        self._term_ids: dict[str, int] = {}
        self._post_docs: list[array[int]] = []
        self._post_tf: list[array[float]] = []
        self._df: list[int] = []
        self._doc_rowid = array("q")
        self._doc_len = array("f")
        self._doc_session = array("i")
        self._doc_terms: list[array[int] | None] = []
        self._alive = array("b")
        self._doc_of: dict[int, int] = {}
        self._session_codes: dict[str, int] = {}
        self._n_alive = 0
        self._total_len = 0.0
        self._dead = 0
        self._max_rowid = 0
        self._changes_seen = 0
        self._data_version: tuple[int, int] | None = None
        self._dirty = True
        self._ready = False

    @property
    def ready(self) -> bool:
        """Whether the first build has finished."""
        return self._ready

    def state(self) -> str:
        """``ready``, ``building``, ``not built`` or ``failed: <reason>`` (shown by info())."""
        if self._builder is not None:
            return "building"
        if self._failure is not None:
            return f"failed: {self._failure}"
        return "ready" if self._ready else "not built"

    def usable(self) -> bool:
        """Whether a search now would answer without a long catch-up.

        False before the first build and while more than ``BACKLOG`` chunks are waiting
        to be indexed (a bulk ingest): callers then rank with FTS5 and call :meth:`warm`.
        """
        if not self._ready or self._builder is not None:
            return False
        newest = int(self._db.scalar("SELECT coalesce(max(id), 0) FROM chunks"))
        return newest - self._max_rowid <= BACKLOG

    def warm(self) -> None:
        """Build or catch up in a background thread (one at a time); returns at once.

        The first build costs a few seconds at 100k chunks (tokenising every chunk and
        its context in Python); meanwhile callers rank with FTS5. After a failed build
        the next attempt waits ``RETRY_SECONDS`` (doubling up to ``RETRY_MAX_SECONDS``).
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
                "in-memory BM25 index build failed (attempt %d; searches use FTS5, "
                "retry in %.1f s): %s",
                self._failures,
                delay,
                self._failure,
                exc_info=exc,
            )
        else:
            if self._failure is not None:
                logger.info("in-memory BM25 index built after %d failure(s)", self._failures)
            self._failure, self._failures = None, 0
        finally:
            self._builder = None

    def invalidate(self) -> None:
        """This process wrote: catch up before the next search."""
        self._dirty = True

    def rebuild(self) -> None:
        """Drop everything and reload from SQLite."""
        with self._sync:
            with self._lock:
                self._reset()
            self._catch_up_serialised()

    def size(self) -> int:
        """Live documents after catching up."""
        self._catch_up()
        with self._lock:
            return self._n_alive

    def close(self) -> None:
        self._closing = True
        builder = self._builder
        if builder is not None and builder is not threading.current_thread():
            builder.join()
        with self._lock:
            self._reset()

    # -- catching up --------------------------------------------------------------------
    #
    # Lock order (docs/architecture.md): ``_sync`` (one catch-up at a time), then the
    # database's lock to *read* what changed, released before ``_lock`` is taken to
    # *apply* it. Nothing holding ``_lock`` touches the database, and a thread that
    # already holds the database's lock (inside a transaction) never waits for
    # ``_sync``: it serves the index as it is.

    def _catch_up(self) -> None:
        if self._db.held_by_me():
            return  # inside the caller's transaction: uncommitted rows may roll back
        with self._sync:
            self._catch_up_serialised()

    def _catch_up_serialised(self) -> None:
        while True:
            read = self._read_changes()
            if read is None:
                return
            if self._apply(*read):
                return

    def _read_changes(self) -> tuple[tuple[int, int], int, list[Row], list[Row]] | None:
        """``(token, newest_seq, logged, rows)`` to apply, or None when up to date."""
        with self._db.lock:
            if self._db.in_write_transaction:
                return None
            version = self._db.change_token()
            if not self._dirty and version == self._data_version:
                return None
            with self._db.snapshot():
                seen = self._changes_seen if self._max_rowid else None
                newest, logged = read_since(self._db, "chunks_changes", seen, "chunk_rowid, op")
                if logged is None:  # the log was pruned past what we saw: reload everything
                    with self._lock:
                        self._reset()
                    logged = []
                reread = sorted(
                    {int(r) for r, op in logged if op == "u" and int(r) <= self._max_rowid}
                )
                rows = self._db.query(
                    f"SELECT id, session_id, {_COLUMNS} FROM chunks WHERE id > ? ORDER BY id",
                    (self._max_rowid,),
                )
                if reread:
                    rows += self._db.query(
                        f"SELECT id, session_id, {_COLUMNS} FROM chunks "
                        "WHERE id IN (SELECT value FROM json_each(?))",
                        (f"[{','.join(map(str, reread))}]",),
                    )
        return version, newest, logged, rows

    def _apply(
        self, version: tuple[int, int], newest: int, logged: list[Row], rows: list[Row]
    ) -> bool:
        """Apply a read under the index lock; False when a compaction needs a re-read."""
        background = threading.current_thread() is self._builder
        with self._lock:
            for rowid, _op in logged:
                self._remove(int(rowid))
            self._changes_seen = newest
            for i, (rowid, session_id, *columns) in enumerate(rows):
                if i % 16 == 0 and background:
                    # Hand the GIL over often: a searching thread re-takes it after every
                    # SQLite step and would otherwise wait a whole switch interval each time.
                    time.sleep(0)
                    if self._closing:
                        self._reset()
                        return True
                self._add(int(rowid), str(session_id), columns)
                self._max_rowid = max(self._max_rowid, int(rowid))
            if self._dead > max(1024, len(self._alive) // 4):
                self._reset()  # compact the tombstones: read everything again
                return False
            self._data_version = version
            self._dirty = False
            self._ready = True
            return True

    def _add(self, rowid: int, session_id: str, columns: Sequence[str]) -> None:
        if rowid in self._doc_of:
            self._remove(rowid)
        doc = len(self._doc_rowid)
        tf: dict[str, float] = {}
        length = 0
        for weight, text in zip(self._weights, columns, strict=True):
            tokens = self._tokens(text) if text else []
            length += len(tokens)
            for token, n in Counter(tokens).items():
                tf[token] = tf.get(token, 0.0) + weight * n
        term_ids = self._term_ids
        tids = array("i")
        for token, freq in tf.items():
            tid = term_ids.get(token)
            if tid is None:
                tid = term_ids[token] = len(self._df)
                self._df.append(0)
                self._post_docs.append(array("i"))
                self._post_tf.append(array("f"))
            self._post_docs[tid].append(doc)
            self._post_tf[tid].append(freq)
            self._df[tid] += 1
            tids.append(tid)
        code = self._session_codes.setdefault(session_id, len(self._session_codes))
        self._doc_rowid.append(rowid)
        self._doc_len.append(float(length))
        self._doc_session.append(code)
        self._doc_terms.append(tids)
        self._alive.append(1)
        self._doc_of[rowid] = doc
        self._n_alive += 1
        self._total_len += length

    def _remove(self, rowid: int) -> None:
        doc = self._doc_of.pop(rowid, None)
        if doc is None:
            return
        terms = self._doc_terms[doc]
        for tid in terms or ():
            self._df[tid] -= 1
        self._doc_terms[doc] = None
        self._alive[doc] = 0
        self._n_alive -= 1
        self._total_len -= self._doc_len[doc]
        self._dead += 1

    # -- searching ----------------------------------------------------------------------

    def search(
        self, query: str, k: int, *, where: VectorFilter | None = None
    ) -> list[tuple[int, float]]:
        """``(chunk_rowid, bm25)`` best first, higher is better (FTS5's ``-bm25``)."""
        terms = self.query_terms(query)
        self._catch_up()
        with self._lock:
            if not terms or k <= 0 or self._n_alive == 0:
                return []
            return self._score(terms, k, where)

    def _score(
        self, terms: list[str], k: int, where: VectorFilter | None
    ) -> list[tuple[int, float]]:
        n_docs = len(self._doc_rowid)
        avgdl = self._total_len / self._n_alive if self._n_alive else 1.0
        lengths = np.frombuffer(self._doc_len, dtype=np.float32)[:n_docs]
        docs_parts: list[npt.NDArray[np.int32]] = []
        score_parts: list[npt.NDArray[np.float64]] = []
        for term in terms:
            tid = self._term_ids.get(term)
            if tid is None or self._df[tid] <= 0:
                continue
            n = self._df[tid]
            idf = max(math.log((self._n_alive - n + 0.5) / (n + 0.5)), IDF_FLOOR)
            docs = np.array(self._post_docs[tid], dtype=np.int32)
            freq = np.array(self._post_tf[tid], dtype=np.float64)
            norm = K1 * (1.0 - B + B * lengths[docs] / avgdl)
            docs_parts.append(docs)
            score_parts.append(idf * freq * (K1 + 1.0) / (freq + norm))
        if not docs_parts:
            return []
        all_docs = np.concatenate(docs_parts)
        scores = np.bincount(all_docs, weights=np.concatenate(score_parts), minlength=n_docs)
        # Every matching document scores > 0 (IDF is floored above zero).
        candidates = np.flatnonzero(scores > 0.0)
        keep = np.frombuffer(self._alive, dtype=np.int8)[candidates].astype(bool)
        keep &= self._filter_mask(candidates, where)
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
        # Best first; equal scores: higher rowid (more recent) first, like the SQL legs.
        rowids = np.frombuffer(self._doc_rowid, dtype=np.int64)[candidates[top]]
        order = np.lexsort((-rowids, -cand_scores[top]))[:k]
        return [(int(rowids[i]), float(cand_scores[top][i])) for i in order]

    def _filter_mask(
        self, candidates: npt.NDArray[np.intp], where: VectorFilter | None
    ) -> npt.NDArray[np.bool_]:
        mask = np.ones(len(candidates), dtype=bool)
        if where is None:
            return mask
        if where.session_ids is not None:
            codes = [self._session_codes[s] for s in where.session_ids if s in self._session_codes]
            sessions = np.frombuffer(self._doc_session, dtype=np.int32)[candidates]
            mask &= np.isin(sessions, np.array(codes, dtype=np.int32))
        if where.rowids is not None:
            rowids = np.frombuffer(self._doc_rowid, dtype=np.int64)[candidates]
            mask &= np.isin(rowids, where.rowids)
        return mask
