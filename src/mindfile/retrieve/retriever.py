"""One read path: the filter and the legs that ``search`` and ``build_context`` share.

A :class:`ReadFilter` says which chunks a reader may see: some sessions (a user's, a
session list), tags, and optionally a SQL condition on ``chunks AS c`` (the context
builder's lookback, recent window and channel rules). It is applied *inside* each leg,
before fusion: session filters in the derived indexes directly, anything finer as the
set of allowed chunk rowids resolved in SQL.

:class:`Retriever` runs the legs over a filter: the vector index, and BM25 on the
in-memory index when it is ready, else on FTS5. Expired chunks (``expires_at`` passed,
not pinned; :mod:`mindfile.manage.expiry`) are hidden from both legs until the sweep
deletes them: each leg over-fetches by how many there are (usually none) and drops
them, so its top ``k`` stays exact. Every reader goes through here, so a fix or a new
index backend reaches all of them at once (docs/architecture.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from mindfile.embed.base import Vector
from mindfile.manage.expiry import hidden_rowids
from mindfile.retrieve.fts import COLUMN_WEIGHTS, query_words
from mindfile.retrieve.overlap import alone, overlap_allowed, searching, side_thread
from mindfile.storage.backend import AnyDatabase, is_postgres, lifecycle_store, search_store
from mindfile.storage.db import utcnow
from mindfile.storage.fulltext import filter_clause, full_text
from mindfile.vector.base import VectorFilter, VectorIndex

if TYPE_CHECKING:
    from mindfile.retrieve.lexical import Bm25Index

__all__ = ["COMMON_SHARE", "OVERLAP_MIN_DOCS", "PG_WAIT_BACKLOG", "Legs", "ReadFilter", "Retriever"]

#: On Postgres, a search catches the BM25 index up itself when at most this many chunks
#: wait (see :meth:`Retriever._wait_for`).
PG_WAIT_BACKLOG = 50_000

#: A query word in more than this share of the documents the BM25 index holds is left
#: out when FTS5 ranks the chunks the index does not hold yet (the last chunks of a bulk
#: ingest, for seconds), unless every word is.
COMMON_SHARE = 0.25

#: Run the two legs of a search at once from this many chunks in the BM25 index (below
#: it both legs take well under a millisecond and handing one over costs ~0.05 ms).
OVERLAP_MIN_DOCS = 20_000

Hits = list[tuple[int, float]]


@dataclass(frozen=True, slots=True)
class ReadFilter:
    """Which chunks a read may return (every field narrows; the default allows all).

    ``session_ids``: only these sessions (an empty tuple allows nothing). ``tags``:
    every tag must be on the chunk. ``condition``/``params``: extra SQL on
    ``chunks AS c``.
    """

    session_ids: tuple[str, ...] | None = None
    tags: tuple[str, ...] = ()
    condition: str | None = None
    params: tuple[Any, ...] = ()

    def narrow(self, session_ids: Sequence[str]) -> ReadFilter:
        """This filter, further limited to ``session_ids`` (order kept)."""
        allowed = tuple(dict.fromkeys(session_ids))
        if self.session_ids is not None:
            keep = set(allowed)
            allowed = tuple(s for s in self.session_ids if s in keep)
        return replace(self, session_ids=allowed)

    @property
    def empty(self) -> bool:
        """True when no chunk can pass (no session allowed)."""
        return self.session_ids is not None and not self.session_ids

    def clause(self) -> tuple[str, list[Any]]:
        """The filter as ``" AND ..."`` SQLite SQL on ``chunks AS c``, and its parameters
        (the search store's :meth:`~mindfile.storage.search.SearchStore.rowids_matching`
        is the backend-neutral way to apply it)."""
        return filter_clause(self.session_ids, self.tags, self.condition, self.params)

    def resolve(self, db: AnyDatabase) -> VectorFilter | None:
        """The filter in the form the derived indexes take (None: no restriction).

        Sessions alone stay a session filter (the indexes hold each chunk's session);
        tags or a condition become the allowed rowids, resolved in SQL.
        """
        if self.empty:
            return VectorFilter(rowids=np.zeros(0, dtype=np.int64))
        if self.tags or self.condition:
            rows = search_store(db).rowids_matching(
                self.session_ids, self.tags, self.condition, self.params
            )
            return VectorFilter(rowids=rows)
        if self.session_ids is not None:
            return VectorFilter(session_ids=self.session_ids)
        return None


@dataclass(frozen=True, slots=True)
class Legs:
    """Each leg's hits ``(chunk_rowid, score)``, best first; ``lexical_backend`` says
    which BM25 ranked them (``"memory"``, ``"fts5"``, ``"memory+fts5"``: the index for
    the chunks it holds, FTS5 for newer ones, or None when it did not run)."""

    vector: Hits
    lexical: Hits
    lexical_backend: str | None = None
    #: What ``then`` returned for the lexical hits, when it ran (see :meth:`Retriever.legs`).
    then: Any = None
    #: What ``meanwhile`` returned for them, when it ran (see :meth:`Retriever.legs`).
    meanwhile: Any = None


class Retriever:
    """Runs the legs of a read over a :class:`ReadFilter` (see the module docstring)."""

    def __init__(self, db: AnyDatabase, index: VectorIndex, lexical: Bm25Index | None) -> None:
        self.db = db
        self.index = index
        self.lexical = lexical
        self.full_text = full_text(db)
        #: Each filter as :meth:`_scope` resolved it: a read's legs and its feedback
        #: query resolve it once (a context's scope is ~100k rowids at 117k chunks).
        #: (A list: a Postgres filter's parameters may hold lists, so it is not hashable.)
        self._scopes: list[tuple[ReadFilter, tuple[VectorFilter | None, set[int]] | None]] = []

    def _overlap(self, bm25: Bm25Index) -> bool:
        """Whether to run the BM25 leg on the side thread while this thread runs the
        vector leg (:mod:`mindfile.retrieve.overlap`): the index is large enough for
        that to pay (:data:`OVERLAP_MIN_DOCS`), no other search of this process is in
        flight (the cores are busy then), and never inside the caller's transaction
        (the side thread would wait for the database lock this thread holds)."""
        return (
            bm25.docs_held() >= OVERLAP_MIN_DOCS
            and alone()
            and not self.db.held_by_me()
            and overlap_allowed()
        )

    def _wait_for(self, bm25: Bm25Index) -> bool:
        """Whether to let ``bm25`` catch up now rather than rank with the database.

        On Postgres: each process builds its index in the heap (there is no published
        base to map), and the database's ranking (``ts_rank_cd``) orders differently
        than BM25, so a search indexes a backlog of up to :data:`PG_WAIT_BACKLOG`
        chunks itself (measured: 1.9 s for 20,000 chunks of 40 words on a loaded
        2-core machine) and answers as SQLite's BM25 would; a larger one (a bulk
        ingest) is built in the background meanwhile, as on SQLite.
        Never inside the caller's transaction (its uncommitted rows may roll back).
        """
        return (
            is_postgres(self.db) and not self.db.held_by_me() and bm25.backlog() <= PG_WAIT_BACKLOG
        )

    def _rank_with_fts5(
        self,
        bm25: Bm25Index | None,
        query: str,
        fetch: int,
        where: VectorFilter | None,
        flt: ReadFilter,
    ) -> Hits:
        """The lexical leg while ``bm25`` catches up: the chunks it holds ranked by it
        (none without it), the newer ones by FTS5 on the same BM25 scale."""
        mine: Hits = []
        held: int | None = None
        words = query_words(query)
        if bm25 is not None:
            mine, held = bm25.search_held(query, fetch, where=where)
            # FTS5's bm25() costs ~1.2 us for every matching row past ``held``: a word
            # in a quarter of the documents matches a quarter of the backlog and adds
            # little to any score. Without such words the backlog ranks ~2x faster and
            # keeps 99% of its top 50 (benchmarks/README.md, "After a bulk ingest").
            common = bm25.common_words(words, COMMON_SHARE)
            if common and len(common) < len(words):
                words = [w for w in words if w not in common]
        lexical = self.full_text.search(
            words,
            fetch,
            weights=COLUMN_WEIGHTS,
            session_ids=flt.session_ids,
            tags=flt.tags,
            condition=flt.condition,
            params=flt.params,
            after=held or 0,
        )
        if bm25 is None:
            return lexical
        return sorted(mine + lexical, key=lambda h: (-h[1], -h[0]))[:fetch]

    def _scope(self, flt: ReadFilter) -> tuple[VectorFilter | None, set[int]] | None:
        """``flt`` as the indexes take it, and the expired chunks every read leaves out
        (ask for that many more, then drop them); None when it allows no chunk. Resolved
        once per filter in this retriever (one read)."""
        for seen, known in self._scopes:
            if seen is flt or seen == flt:
                return known
        hidden = hidden_rowids(lifecycle_store(self.db), utcnow())
        where = flt.resolve(self.db)
        out: tuple[VectorFilter | None, set[int]] | None = (where, hidden)
        if where is not None and where.rowids is not None and len(where.rowids) == 0:
            out = None
        self._scopes.append((flt, out))
        return out

    def resolved(self, flt: ReadFilter) -> VectorFilter | None:
        """:meth:`ReadFilter.resolve`, shared with this read's legs (resolved once)."""
        scope = self._scope(flt)
        return VectorFilter(rowids=np.zeros(0, dtype=np.int64)) if scope is None else scope[0]

    def weighted_lexical(
        self, terms: Sequence[str], weights: Sequence[float], flt: ReadFilter, k: int
    ) -> Hits:
        """The top ``k`` BM25 hits of index ``terms`` weighted by ``weights``, within
        ``flt`` and without expired memories; none unless the in-memory index is ready
        without catching up (the feedback pass is an extra: it never waits for a build
        or ranks with FTS5)."""
        bm25 = self.lexical
        if bm25 is None or flt.empty or not terms or k <= 0 or not bm25.usable():
            return []
        scope = self._scope(flt)
        if scope is None:
            return []
        where, hidden = scope
        hits = bm25.search_terms(terms, weights, k + len(hidden), where=where)
        if hidden:
            hits = [h for h in hits if h[0] not in hidden]
        return hits[:k]

    @searching()  # counted in flight (mindfile.retrieve.overlap)
    def legs(
        self,
        query: str,
        query_vec: Vector | None,
        flt: ReadFilter,
        *,
        vector_k: int,
        lexical_k: int,
        then: Callable[[Hits], Any] | None = None,
        meanwhile: Callable[[Hits], Any] | None = None,
    ) -> Legs:
        """The top ``vector_k`` vector hits (when ``query_vec`` is given) and the top
        ``lexical_k`` BM25 hits of ``query``, both within ``flt``.

        ``then``: when the BM25 leg runs on the side thread, called there with its hits
        (hidden ones included) while the vector leg still runs; its result is
        :attr:`Legs.then` (None when it did not run: the caller does that work itself).
        ``meanwhile``: likewise, called on this thread with those hits once the vector
        leg is done, while the side thread runs ``then`` (else this thread would only
        wait for it); its result is :attr:`Legs.meanwhile`.
        """
        if flt.empty or ((query_vec is None or vector_k <= 0) and lexical_k <= 0):
            return Legs([], [])
        scope = self._scope(flt)
        if scope is None:
            return Legs([], [])
        where, hidden = scope
        want_vector = query_vec is not None and vector_k > 0
        lexical: Hits = []
        backend: str | None = None
        warm_after: Bm25Index | None = None
        side: Future[tuple[Hits, Any]] | None = None
        handoff = _Handoff()
        then_result: Any = None
        meanwhile_result: Any = None
        if lexical_k > 0:
            bm25 = self.lexical
            held: int | None = None
            if bm25 is not None and not bm25.usable() and not self._wait_for(bm25):
                # Building (or catching up a bulk ingest) takes seconds: rank with FTS5
                # meanwhile, and start it only after these reads (a Python build thread
                # would hold the GIL against this thread's row-by-row reads). A
                # published index still answers for the chunks it holds; FTS5 ranks
                # only the newer ones, on the same BM25 scale.
                warm_after, held = bm25, bm25.held_through()
                if held is None:
                    bm25 = None
            fetch = lexical_k + len(hidden)
            if bm25 is not None and held is None:
                backend = "memory"
                if want_vector and self._overlap(bm25):
                    side = side_thread().try_start(
                        partial(_lexical_then, bm25, query, fetch, where, then, handoff)
                    )
                if side is None:
                    lexical = bm25.search(query, fetch, where=where)
            else:
                backend = "fts5" if bm25 is None else "memory+fts5"
                ranked = partial(self._rank_with_fts5, bm25, query, fetch, where, flt)
                if bm25 is not None and want_vector and self._overlap(bm25):
                    # The FTS5 part runs in SQLite, without the interpreter's lock: on
                    # the side thread it overlaps the vector leg (right after a bulk
                    # ingest, ~4-12 ms for the newest chunks).
                    side = side_thread().try_start(partial(_ranked_then, ranked, then, handoff))
                if side is None:
                    lexical = ranked()
        vector: Hits = []
        if want_vector:
            assert query_vec is not None
            try:
                vector = self.index.search(query_vec, vector_k + len(hidden), where=where)
                if side is not None and meanwhile is not None:
                    hits = handoff.wait()
                    if hits is not None:
                        meanwhile_result = meanwhile(hits)
            finally:
                if side is not None:  # never leave the side thread's result behind
                    lexical, then_result = side.result()
        if hidden:
            vector = [h for h in vector if h[0] not in hidden][:vector_k]
            lexical = [h for h in lexical if h[0] not in hidden][:lexical_k]
        if warm_after is not None:
            warm_after.warm()
        return Legs(vector, lexical, backend, then_result, meanwhile_result)


class _Handoff:
    """The side thread's lexical hits, handed to the searching thread as soon as they
    are ranked (before ``then`` runs); None when ranking them failed (the failure
    reaches the searching thread through the side thread's future)."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._hits: Hits | None = None

    def give(self, rank: Callable[[], Hits]) -> Hits:
        try:
            self._hits = rank()
            return self._hits
        finally:
            self._ready.set()

    def wait(self) -> Hits | None:
        self._ready.wait()
        return self._hits


def _ranked_then(
    ranked: Callable[[], Hits], then: Callable[[Hits], Any] | None, handoff: _Handoff
) -> tuple[Hits, Any]:
    """The side thread's task when FTS5 ranks the newest chunks: ``ranked``, then
    ``then`` on its hits."""
    hits = handoff.give(ranked)
    return hits, (then(hits) if then is not None else None)


def _lexical_then(
    bm25: Bm25Index,
    query: str,
    k: int,
    where: VectorFilter | None,
    then: Callable[[Hits], Any] | None,
    handoff: _Handoff,
) -> tuple[Hits, Any]:
    """The side thread's task: the BM25 leg, then ``then`` on its hits."""
    hits = handoff.give(partial(bm25.search, query, k, where=where))
    return hits, (then(hits) if then is not None else None)
