"""Preference recall: recommendation questions find what the user said about themselves
(docs/retrieval.md, "Preference recall (issue 14)").

"Can you recommend a video editing course?" shares no word with the memory that
answers it ("ugh, fighting Premiere Pro's timeline again"), and the static model puts
them only loosely close. Two small detectors, no LLM, no dependency:

* :func:`statement_kind` says whether a user-side text states a *preference*, a
  *habit*, a *possession* or a *constraint* (:mod:`mindfile.index.statements`, where it
  lives with :func:`user_side`: the write path classifies every chunk with them and the
  store keeps the answer in ``chunks.user_statement``, migration 0014). Chunks whose
  ``metadata.role`` is assistant, system or tool are never marked.
* :func:`recommendation_intent` says whether a query asks for a recommendation or advice
  ("recommend", "suggest", "any ideas", "what should I", "tips for", "gift for", "which
  ... should", "help me choose" ...).

For a question with that intent, ``search`` (nothing else changes for other queries):

1. runs its legs on the question without its request words (:func:`topic_query`: "a
   video editing course?"), which otherwise match every "thanks for the recommendation!"
   of a chat history;
2. adds a third leg: the question's ``leg`` (50) nearest user-side statements of the
   whole store (within the search's filters) join the fused candidates, scored as the
   vector leg would score them; which chunks are statements is a column of the store
   (:func:`store_marks`), written NULL and classified once per store off the write
   path by :func:`backfill`;
3. adds ``preference = top * weight`` (``top`` the best fused score, as the time boost;
   ``weight`` 1.0) to each statement among the best ``scan`` (200) candidates, shown in
   ``hit.breakdown.preference``. A boost, never a filter: with weight 1.0 statements come
   first and everything else follows in its usual order.

``search(..., preferences=False)`` turns it off. A query without intent costs one
regular expression. Parameters: cross-validated on benchmarks/data/preferences.json
(benchmarks/README.md, "Preference recall").
"""

from __future__ import annotations

import heapq
import logging
import re
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, overload

import numpy as np
import numpy.typing as npt

from mindfile._helpers import by_pages, start_holding
from mindfile._helpers import defer_flags_to as defer_to
from mindfile._helpers import flags_deferred as deferred
from mindfile.embed.base import Vector
from mindfile.index import statements
from mindfile.index.statements import (
    StatementKind,
    is_user_statement,
    marked,
    statement_kind,
    user_side,
)
from mindfile.manage.expiry import hidden_rowids
from mindfile.retrieve.fusion import Fused
from mindfile.storage.backend import AnyDatabase, lifecycle_store, search_store
from mindfile.storage.db import utcnow
from mindfile.storage.index_source import index_source
from mindfile.vector.base import VectorFilter, VectorIndex, ascending, members

__all__ = [
    "DEFAULT_PREFERENCE_CONFIG",
    "INLINE_MAX",
    "PreferenceConfig",
    "StatementKind",
    "apply_preferences",
    "backfill",
    "boost",
    "defer_to",
    "deferred",
    "is_user_statement",
    "leg_query",
    "marked",
    "recommendation_intent",
    "sorted_marks",
    "statement_kind",
    "store_marks",
    "topic_query",
    "user_side",
]

logger = logging.getLogger("mindfile.retrieve")


@dataclass(frozen=True, slots=True)
class PreferenceConfig:
    """The parameters (chosen by cross-validation on benchmarks/data/preferences.json;
    benchmarks/README.md, "Preference recall")."""

    #: Boost of a candidate that states something about the user, as a share of the best
    #: fused score (1.0: such a memory outranks nearly every other candidate).
    weight: float = 1.0
    #: A third leg: the query's ``leg`` nearest statements of the whole store join the
    #: candidates (0: none; then only the best ``scan`` fused candidates are checked).
    leg: int = 50
    scan: int = 200
    #: At most this many statements (the best by fused score) are boosted (0: all).
    limit: int = 0
    #: Run the BM25 leg / embed the query without its request words (:func:`topic_query`).
    strip_bm25: bool = True
    strip_vector: bool = True


DEFAULT_PREFERENCE_CONFIG = PreferenceConfig()

_F = re.IGNORECASE

# --- query intent -------------------------------------------------------------------

_YOU = r"(?:you|u|ya)"
_WE = r"(?:i|we)"
_INTENT = re.compile(
    r"\b(?:"
    # asked of the assistant: "can you recommend", "could you suggest", imperative
    r"(?:can|could|would|will|do|did)\s+" + _YOU + r"\s+(?:\w+\s+)?(?:recommend|suggest|advise)"
    r"|" + _YOU + r"(?:'d|\s+would|\s+might)\s+(?:\w+\s+)?(?:recommend|suggest|advise)"
    r"|(?:^|[.!?,;:]\s*|\bplease\s+)(?:recommend|suggest)\b"
    r"|(?:recommend|suggest)\s+(?:me|us|a|an|some|any|something|anything|somewhere|one|good)\b"
    r"|(?:any|some|your|good|need|want|got|give\s+me)\s+(?:[\w'-]+\s+){0,3}(?:recommendations?|suggestions?"
    r"|ideas?|tips|advice|inspiration|pointers|thoughts\s+on)\b"
    r"|(?:ideas?|tips|advice|suggestions?)\s+(?:for|on|about)\s+(?:a|an|my|our|what|how|where|which)\b"
    r"|(?:gift|present)s?\s+(?:for|ideas?)\b"
    # first person deciding: "what should I cook", "where could we go", "should I buy"
    r"|(?:what|where|which|how|when)\s+(?:\w+\s+){0,3}(?:should|could|shall|ought\s+to)\s+"
    + _WE
    + r"\b|which\s+(?:\w+\s+){0,3}(?:would|do)\s+"
    + _YOU
    + r"\b"
    r"|\bshould\s+"
    + _WE
    + r"\s+(?:get|buy|try|go|read|watch|learn|cook|make|order|take|pick|choose)\b"
    r"|help\s+(?:me|us)\s+(?:choose|pick|decide|find|plan)\b|(?:plan|organi[sz]e)\s+(?:my|our)\b"
    r"|what(?:'s|\s+is|\s+are)\s+(?:a\s+|some\s+)?good\b"
    r"|(?:looking\s+for|in\s+the\s+market\s+for)\s+(?:a|an|some)\b"
    r")",
    _F,
)


# Words that only say "I want a recommendation": they match every "thanks for the
# recommendation!" in a chat history, not what the user likes.
_REQUEST_WORDS = re.compile(
    r"\b(?:recommend\w*|suggest\w*|ideas?|tips?|advi[cs]e|inspiration|pointers|thoughts"
    r"|help|choose|pick|decide|should|could|would|good|great|best|nice|any|some|something"
    r"|anything|please|thanks?|can|you|u|ya|i|me|my|we|us|our|get|buy|try|next)\b",
    re.IGNORECASE,
)


def topic_query(query: str) -> str:
    """``query`` without its request words ("Can you recommend a video editing course?"
    -> "a video editing course?"); the query itself when nothing else would be left."""
    rest = " ".join(_REQUEST_WORDS.sub(" ", query).split())
    return rest if re.search(r"\w", rest) else query


def leg_query(query: str, leg: Literal["bm25", "vector"]) -> str:
    """The text a leg runs for a recommendation question (:func:`topic_query` when the
    configuration strips it)."""
    cfg = DEFAULT_PREFERENCE_CONFIG
    strip = cfg.strip_bm25 if leg == "bm25" else cfg.strip_vector
    return topic_query(query) if strip else query


def recommendation_intent(query: str) -> bool:
    """True when ``query`` asks for a recommendation, a suggestion or advice."""
    return _INTENT.search(query) is not None


# --- statements (mindfile.index.statements) -----------------------------------------

#: Chunks classified per page of the backfill (one short write transaction each).
_PAGE = 2_000
#: Unclassified chunks a search classifies itself, in memory (~30-70 us each), before
#: the backfill has persisted them; more (a bulk ingest) are left to the backfill.
INLINE_MAX = 256
#: The backfill's pause between pages (seconds), and how many chunks it classifies
#: before it offers the interpreter to other threads (``sleep(0)``, ~0.15 ms of work).
#: Without the offers a search thread of the same process waits up to the switch
#: interval (5 ms) each time it takes the GIL back from SQLite or numpy: searches during
#: the backfill had a p50 of ~70 ms (20.8k chunks, 2 cores), ~4 ms with them (2.5 ms
#: without a backfill), for a backfill ~1.5x longer.
_PAUSE = 0.002
_SLICE = 4


@dataclass(frozen=True, slots=True)
class _Cached:
    """A store's statement rowids as last read: every flag at or below ``through`` was
    final then (set, and below the lowest unclassified chunk; a chunk's flag goes from
    NULL to 0 or 1 once, and new chunks come above, unclassified: ids only grow, in
    commit order on both backends), so the next read needs only the statements above
    it. ``seen``: the ``chunks_changes`` seq up to which deletions were applied;
    ``lexicon``: the lexicon version the flags were made by (a reset drops the cache).
    Consolidation's survivor keeps its text and role, and so its flag."""

    rows: frozenset[int]
    through: int
    seen: int
    lexicon: int


class _Statements:
    """One store's statements in this process: ``lock`` is held by whoever classifies
    its unclassified chunks (the background thread, or a ``wait=True`` caller), so a
    process runs one backfill at a time per store; ``cache`` the last set read (replaced
    whole, never changed in place: searches read it without a lock)."""

    __slots__ = ("array", "cache", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cache: _Cached | None = None
        #: the last marks asked for as a sorted array (:func:`sorted_marks`)
        self.array: tuple[frozenset[int], npt.NDArray[np.int64]] | None = None


_STATES: weakref.WeakKeyDictionary[AnyDatabase, _Statements] = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def _state(db: AnyDatabase) -> _Statements:
    with _STATES_LOCK:
        state = _STATES.get(db)
        if state is None:
            state = _STATES[db] = _Statements()
        return state


@overload
def store_marks(db: AnyDatabase, *, wait: Literal[True] = True) -> frozenset[int]: ...
@overload
def store_marks(db: AnyDatabase, *, wait: bool) -> frozenset[int] | None: ...
def store_marks(db: AnyDatabase, *, wait: bool = True) -> frozenset[int] | None:
    """The rowids of the chunks of ``db`` that are user-side statements about the user
    (``chunks.user_statement = 1``).

    Chunks are written unclassified (NULL, migration 0014) and classified off the write
    path by :func:`backfill`, once for every process. With ``wait=True`` what is left
    is classified inside the call and the answer is complete (a read-only store: in
    memory, for this answer only). With ``wait=False`` (searches) the answer is the
    chunks classified so far, and the first call that finds unclassified ones in a
    writable store starts the backfill in a background thread. Up to
    :data:`INLINE_MAX` unclassified chunks (the latest turns of a conversation) are
    classified inside the call, in memory; above that the caller classifies its own
    candidates that are not (``unclassified_among``). None when the flags were made by
    an older lexicon and are being made again.

    The set is kept per open store and caught up at each call like the derived indexes:
    statements above what was final at the last read, deletions from the
    ``chunks_changes`` log (a few indexed reads; the whole set is read again when the
    log was pruned past what was applied or the lexicon changed).
    """
    store, state = search_store(db), _state(db)
    lexicon = store.statement_lexicon()
    stale = lexicon < statements.LEXICON_VERSION and not db.readonly
    first = store.first_unclassified()
    if stale or (first is not None and wait):
        state.cache = None
        if not wait:
            _start_backfill(db)
            return None
        if db.readonly:  # cannot persist: classify the rest for this answer only
            found = set(store.statement_rowids())
            after = 0
            while rows := store.unclassified_after(after, _PAGE):
                found |= marked(rows)
                after = rows[-1][0]
            return frozenset(found)
        with state.lock:
            _classify_all(db, pause=0.0)
        lexicon, first = store.statement_lexicon(), store.first_unclassified()
    # A few unclassified chunks (a conversation's latest turns) are classified here, for
    # this answer (the backfill persists them); a bulk ingest's are left to it. They are
    # read before the classified ones: a flag goes from unclassified to classified (its
    # chunk unchanged), so a chunk the backfill classifies between the reads is in one.
    tail = store.unclassified_after(first - 1, INLINE_MAX + 1) if first is not None else []
    known = _caught_up(db, state, lexicon, first)
    if first is None:
        return known
    if not db.readonly:
        _start_backfill(db)
    if len(tail) > INLINE_MAX:
        return known
    extra = marked(tail)
    return known.union(extra) if extra else known  # the same set: sorted_marks keeps it


def sorted_marks(db: AnyDatabase, marks: frozenset[int]) -> npt.NDArray[np.int64]:
    """``marks`` (:func:`store_marks`) as a sorted array, made once while they stay the
    same set: at 1M chunks a store has ~200k statements, and sorting them cost ~7 ms a
    recommendation question."""
    state = _state(db)
    memo = state.array
    if memo is not None and memo[0] is marks:
        return memo[1]
    arr = np.fromiter(marks, dtype=np.int64, count=len(marks))
    arr.sort()
    arr.flags.writeable = False  # shared by every question (an index may key on it)
    state.array = (marks, arr)  # replaced whole: read without a lock
    return arr


def _caught_up(
    db: AnyDatabase, state: _Statements, lexicon: int, first: int | None
) -> frozenset[int]:
    store, source = search_store(db), index_source(db)
    cache = state.cache
    if cache is not None and cache.lexicon == lexicon:
        newest, changed = source.text_changes_since(cache.seen)
        if changed is not None:  # else the log was pruned past ``seen``: read it all
            gone = {int(r) for r, op in changed if op == "d"}
            new = store.statement_rowids(cache.through)
            rows = cache.rows
            if gone or new:
                rows = rows.difference(gone).union(new)
            through = _through(first, new, cache.through)
            if rows is not cache.rows or newest != cache.seen or through != cache.through:
                state.cache = _Cached(rows, through, newest, lexicon)
            return rows
    # The log's position first: a deletion after it is applied at the next call.
    newest, _ = source.text_changes_since(None)
    found = store.statement_rowids()
    rows = frozenset(found)
    state.cache = _Cached(rows, _through(first, found, 0), newest, lexicon)
    return rows


def _through(first: int | None, read: list[int], before: int) -> int:
    """Up to where the flags just read were final: below the lowest unclassified chunk,
    or (all classified) the highest statement read."""
    if first is not None:
        return max(before, first - 1)
    return max(before, read[-1] if read else 0)


def backfill(db: AnyDatabase, *, pause: float = _PAUSE, pages: int | None = None) -> int:
    """Classify every chunk of ``db`` that has no ``user_statement`` yet (all of them,
    first, if an older lexicon classified them: :data:`~mindfile.index.statements.
    LEXICON_VERSION`), page by page (of the first ``pages`` pages of them, when given):
    each page read and classified outside any lock and transaction, its flags written in
    one short transaction, ``pause`` seconds between pages (0: no pause, and no offering
    of the interpreter). Returns how many it classified.

    Idempotent and safe beside other writers and other processes doing the same: only
    rows still NULL are written, and a new chunk is classified when it is inserted."""
    with _state(db).lock:
        return _classify_all(db, pause=pause, pages=pages)


def _classify_all(
    db: AnyDatabase, *, pause: float, pages: int | None = None, hand_over: bool = False
) -> int:
    """The backfill's pages; with ``hand_over`` (this process's background thread) it
    stops between pages once a bulk ingest's helper classifies (:func:`defer_to`)."""
    store = search_store(db)
    if store.reset_statements(statements.LEXICON_VERSION):
        logger.info("the statement lexicon changed: reclassifying every chunk")

    def classify(rows: Sequence[tuple[int, str, str]]) -> int:
        flags: list[tuple[int, bool]] = []
        for i, (rowid, text, meta) in enumerate(rows):
            if pause > 0 and i % _SLICE == 0:
                time.sleep(0)  # let a waiting search thread have the interpreter
            flags.append((rowid, is_user_statement(text, meta)))
        store.classify_statements(flags)
        return len(flags)

    return by_pages(
        lambda after: store.unclassified_after(after, _PAGE),
        classify,
        pause=pause,
        pages=pages,
        stopping=lambda: db.closed or (hand_over and deferred(db)),
    )


def _start_backfill(db: AnyDatabase) -> None:
    if deferred(db):
        return
    # Not when running (or while a wait=True caller is classifying).
    start_holding(_state(db).lock, "mindfile-statements", _run_backfill, db)


def _run_backfill(db: AnyDatabase) -> None:
    try:
        started = time.perf_counter()
        n = _classify_all(db, pause=_PAUSE, hand_over=True)
        logger.info(
            "classified %d chunks as user statements or not in %.1fs",
            n,
            time.perf_counter() - started,
        )
    except Exception as exc:  # a closed store, a busy database: the next search retries
        if not db.closed:
            logger.warning("classifying the store's user statements failed: %s", exc)


def apply_preferences(
    db: AnyDatabase,
    fused: dict[int, Fused],
    cfg: PreferenceConfig | None = None,
    *,
    index: VectorIndex | None = None,
    query_vec: Vector | None = None,
    where: VectorFilter | None = None,
    vector_weight: float = 0.0,
    vector_width: float = 0.0,
) -> None:
    """Boost those of the best ``cfg.scan`` fused candidates that are user-side
    statements about the user, in place (``cfg`` None: :data:`DEFAULT_PREFERENCE_CONFIG`,
    read at call time).

    With ``cfg.leg`` and a query vector, the ``leg`` statements nearest to the query
    (within ``where``, expired chunks excluded) join the candidates first, scored as the
    vector leg would score them (``vector_weight`` times the cosine min-max scaled over
    the vector leg's candidates, over a range of at least ``vector_width`` as calibrated
    fusion does, clipped to [0, 1]).
    """
    cfg = cfg or DEFAULT_PREFERENCE_CONFIG
    # those classified so far (None: no third leg, or being reclassified)
    marks = store_marks(db, wait=False) if cfg.leg > 0 else None
    if marks and index is not None and query_vec is not None:
        _third_leg(db, fused, marks, index, query_vec, where, vector_weight, vector_width, cfg.leg)
    best = heapq.nsmallest(cfg.scan, fused.values(), key=lambda f: (-f.score, f.rowid))
    rowids = [f.rowid for f in best]
    store = search_store(db)
    found: set[int] | frozenset[int]
    extra: set[int] | frozenset[int] = frozenset()
    if marks is None:  # no third leg: the statements among the candidates
        found = marked(store.chunk_statements(rowids))
    else:  # and the candidates not classified yet (written since the backfill ran),
        # apart: a union would copy the store's ~200k statements at 1M chunks
        found, extra = marks, marked(store.unclassified_among(rowids))
    chosen = [f.rowid for f in best if f.rowid in found or f.rowid in extra]
    boost(fused, set(chosen[: cfg.limit] if cfg.limit > 0 else chosen), cfg)


def _third_leg(
    db: AnyDatabase,
    fused: dict[int, Fused],
    statements: frozenset[int],
    index: VectorIndex,
    query_vec: Vector,
    where: VectorFilter | None,
    vector_weight: float,
    vector_width: float,
    k: int,
) -> None:
    allowed = sorted_marks(db, statements)
    hidden = hidden_rowids(lifecycle_store(db), utcnow())
    if hidden:
        allowed = allowed[~members(allowed, ascending(list(hidden)))]
    if where is not None and where.rowids is not None:
        allowed = allowed[members(allowed, ascending(where.rowids))]
    if len(allowed) == 0:
        return
    flt = VectorFilter(session_ids=None if where is None else where.session_ids, rowids=allowed)
    sims = [f.vector for f in fused.values() if f.vector is not None and f.vector_rank]
    lo, hi = (min(sims), max(sims)) if sims else (0.0, 1.0)
    span = max(hi - lo, vector_width)
    span = span if span > 1e-12 else 1.0
    for rowid, sim in index.search(query_vec, k, where=flt):
        if rowid not in fused:
            norm = min(1.0, max(0.0, (sim - lo) / span))
            fused[rowid] = Fused(rowid, vector=sim, vector_norm=norm, score=vector_weight * norm)


def boost(fused: dict[int, Fused], marked: set[int], cfg: PreferenceConfig) -> None:
    """Add ``top * cfg.weight`` to each candidate in ``marked`` (``Fused.preference``;
    the others get 0.0), in place."""
    if not fused:
        return
    top = max((f.score for f in fused.values()), default=0.0)
    scale = top if top > 0 else 1.0
    for rowid, item in fused.items():
        item.preference = scale * cfg.weight if rowid in marked else 0.0
        item.score += item.preference
