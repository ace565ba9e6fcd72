"""Token match: the best fused candidates reranked by their closest word pieces.

A static model embeds a text as the mean of its word-piece vectors, so one strong
match ("peaceful" for "peace", "mother" for "family members") is diluted by every
other word of a long chunk, and BM25 sees only exact stems. Token match scores each of
the best ``depth`` fused candidates by late interaction in the model's token space:
for every word piece of the query, the cosine of the closest word piece of the chunk,
averaged with the query pieces' weights (their vector norms: the model's SIF
weighting, so "what" and "did" count little). Floored min-max over the candidates
(range at least ``width``, so a few close candidates keep close scores), times
``weight``, is added to the fused score; ``hit.breakdown.token_match`` shows it.

Each chunk's set of word pieces is stored with it (``chunks.token_set``, SQLite
migration 0016, Postgres 0010), made off the write path by :func:`backfill` (a
background thread of a writable store, started by the first search that meets chunks
without one, and the engine's idle follower); a search tokenises its own candidates
that have none yet (~40 us a 640-character chunk). Scoring 100 candidates is a few
numpy calls over their distinct pieces.

Only the bundled model recommends it (``StaticEmbedder.token_match``); the weight and
depth were chosen by cross-validation on LoCoMo (benchmarks/README.md, "Token match").
``search(token_match=False)`` turns it off.
"""

from __future__ import annotations

import heapq
import json
import logging
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mindfile._helpers import by_pages, start_holding
from mindfile._helpers import defer_flags_to as defer_to
from mindfile._helpers import flags_deferred as deferred
from mindfile.index.chunking import normalize_text
from mindfile.retrieve.fusion import Fused
from mindfile.storage.backend import AnyDatabase, search_store
from mindfile.storage.index_source import index_source

__all__ = [
    "DEFAULT_TOKEN_MATCH_CONFIG",
    "INLINE_MAX",
    "Scored",
    "TokenMatchConfig",
    "TokenMatcher",
    "apply_token_match",
    "backfill",
    "defer_to",
    "deferred",
    "matcher_for",
    "prescore",
    "raw_scores",
    "stop",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TokenMatchConfig:
    """``weight`` 0 turns token match off."""

    #: The largest lift (the best-matching candidate's, when the candidates' scores
    #: spread over at least ``width``).
    weight: float = 0.4
    #: How many of the best fused candidates are scored.
    depth: int = 100
    #: The smallest range the min-max over the candidates' scores divides by.
    width: float = 0.4


DEFAULT_TOKEN_MATCH_CONFIG = TokenMatchConfig()

#: While a bulk ingest's helper writes the sets (:func:`defer_to`): candidates without
#: a stored set that a search still tokenises itself (~40 us each for ~1,000-character
#: chunks); with more, it goes without token match until the helper reaches them.
INLINE_MAX = 16
#: Chunks tokenised per page of the backfill (one short write transaction each), and
#: per slice between offers of the interpreter to other threads (``sleep(0)``, ~0.15 ms
#: of work: a search thread waiting for the interpreter would otherwise wait up to the
#: switch interval, as for the preference backfill).
_PAGE = 2_000
_SLICE = 4
_PAUSE = 0.002


class TokenMatcher:
    """Late interaction over one static model's word pieces, through its neighbour
    table: for each word piece, its ``K`` nearest pieces and their cosines
    (``neighbours-*.npy`` next to the model, memory-mapped: shared by every process;
    ``scripts/build_token_neighbours.py``). A query piece scores a chunk with the
    cosine of its nearest neighbour in the chunk, 0 when none of its ``K`` is there."""

    def __init__(self, embedder: Any, table: tuple[npt.NDArray[Any], npt.NDArray[Any]]) -> None:
        self._embedder = embedder
        self.ids, self.sims = table
        # The query pieces' weights: the vectors' norms, which carry the model's SIF
        # weighting (frequent pieces such as "what", "the" are short). einsum, not
        # np.linalg.norm: norm's 30 MB temporary cost ~60 ms of page faults the first
        # time in a process (the first search), einsum ~1 ms.
        matrix = embedder.token_vectors()
        norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
        self.weights: npt.NDArray[np.float64] = norms.astype(np.float64)
        self.vocabulary = len(matrix)

    def token_sets(self, texts: Sequence[str]) -> list[npt.NDArray[np.uint16]]:
        """Each text's distinct word pieces, sorted."""
        return [
            np.unique(np.asarray(ids, dtype=np.int64)).astype(np.uint16)
            for ids in self._embedder.token_ids([normalize_text(t) for t in texts])
        ]

    def query_ids(self, query: str) -> npt.NDArray[np.int64]:
        """The query's word pieces, repeats kept (a repeated word weighs more), of the
        text the query vector embeds (lone surrogates and NUL replaced)."""
        return np.asarray(self._embedder.token_ids([normalize_text(query)])[0], dtype=np.int64)

    def scores(
        self, query: npt.NDArray[np.int64], sets: Sequence[npt.NDArray[Any]]
    ) -> npt.NDArray[np.float64]:
        """For each set: the query pieces' weighted mean of their best cosine in it (0
        for an empty set or a query without weight)."""
        out = np.zeros(len(sets), dtype=np.float64)
        weights = self.weights[query]
        total = float(weights.sum())
        lengths = np.fromiter((len(s) for s in sets), dtype=np.int64, count=len(sets))
        if total <= 0.0 or not lengths.any():
            return out
        near = np.asarray(self.ids[query], dtype=np.intp)  # query piece x K
        # The query's neighbours as columns 1..n of a small table (column 0: none).
        pieces, where = np.unique(near, return_inverse=True)
        table = np.zeros((len(query), len(pieces) + 1), dtype=np.float32)
        table[np.arange(len(query))[:, None], where.reshape(near.shape) + 1] = self.sims[query]
        column = np.zeros(self.vocabulary, dtype=np.intp)
        column[pieces] = np.arange(1, len(pieces) + 1)
        flat = np.concatenate(sets).astype(np.intp)
        filled = np.flatnonzero(lengths)
        starts = (np.cumsum(lengths) - lengths)[filled]
        # query piece x filled set: each query piece's best cosine in the set (x 255)
        best = np.maximum.reduceat(table[:, column[flat]], starts, axis=1)
        out[filled] = weights @ best / (255.0 * total)
        return out


_MATCHERS_LOCK = threading.Lock()
#: Where an embedder keeps its matcher, or False without a table (on the embedder:
#: they live and die together).
_ATTRIBUTE = "_mindfile_token_matcher"


def matcher_for(embedder: Any) -> TokenMatcher | None:
    """The token matcher of ``embedder`` if it recommends token match, else None."""
    if not getattr(embedder, "token_match", False):
        return None
    found: TokenMatcher | bool | None = getattr(embedder, _ATTRIBUTE, None)
    if found is None:
        with _MATCHERS_LOCK:
            found = getattr(embedder, _ATTRIBUTE, None)
            if found is None:
                # A missing or stale table is looked for (and logged) once, not at every
                # search: False is kept on the embedder.
                table = neighbour_table(embedder.token_model_dir())
                found = False if table is None else TokenMatcher(embedder, table)
                setattr(embedder, _ATTRIBUTE, found)
    return found if isinstance(found, TokenMatcher) else None


def neighbour_table(model_dir: Path) -> tuple[npt.NDArray[Any], npt.NDArray[Any]] | None:
    """The neighbour table shipped next to a model (ids, cosines x 255), memory-mapped;
    None (logged) when it is missing or was built from another version of the model."""
    try:
        info = json.loads((model_dir / "neighbours.json").read_text())
        build = json.loads((model_dir / "build.json").read_text())
        if info.get("model_sha256") != build.get("sha256"):
            logger.warning("the token-neighbour table of %s is stale: no token match", model_dir)
            return None
        ids = np.load(model_dir / "neighbours-ids.npy", mmap_mode="r")
        sims = np.load(model_dir / "neighbours-sims.npy", mmap_mode="r")
    except (OSError, ValueError) as exc:
        logger.warning("no token-neighbour table for %s: %s", model_dir, exc)
        return None
    if ids.shape != sims.shape or ids.dtype != np.uint16 or sims.dtype != np.uint8:
        logger.warning("the token-neighbour table of %s is malformed: no token match", model_dir)
        return None
    return ids, sims


@dataclass(frozen=True, slots=True)
class Scored:
    """Token-match scores before normalisation, by rowid, and which of those rowids had
    no stored set (tokenised for this answer)."""

    scores: dict[int, float]
    inline: frozenset[int]
    #: The query's word pieces they were scored for (None: none scored yet).
    query: npt.NDArray[np.int64] | None = None


_NOTHING = Scored({}, frozenset())


def raw_scores(
    db: AnyDatabase,
    matcher: TokenMatcher,
    query: npt.NDArray[np.int64],
    rowids: Sequence[int],
    *,
    inline_max: int = 0,
) -> Scored | None:
    """The token-match score (before normalisation) of each of ``rowids`` that exists,
    for the query's word pieces ``query``: their stored sets, the others tokenised here
    (and the backfill started, in a writable store). While a bulk ingest's helper
    process writes the sets (:func:`defer_to`) and more than ``inline_max`` of them
    are missing, None instead: the search goes without token match for a few seconds
    rather than tokenise 100 chunks each time."""
    if not rowids or len(query) == 0:
        return Scored({}, frozenset(), query)
    found: dict[int, npt.NDArray[Any]] = {}
    missing: list[tuple[int, str]] = []
    for rowid, blob, text in search_store(db).token_sets(rowids):
        if blob is not None:
            found[rowid] = np.frombuffer(blob, dtype="<u2")
        else:
            missing.append((rowid, text or ""))
    if missing and not db.readonly:
        if not deferred(db):
            _start_backfill(db, matcher)
        elif len(missing) > inline_max:  # a bulk ingest whose helper writes them now
            return None
    if missing:  # written since the backfill ran: tokenised here, for this answer
        made = matcher.token_sets([t for _, t in missing])
        for (rowid, _), tokens in zip(missing, made, strict=True):
            found[rowid] = tokens
    order = list(found)
    values = matcher.scores(query, [found[r] for r in order])
    scores = dict(zip(order, values.tolist(), strict=True))
    return Scored(scores, frozenset(r for r, _ in missing), query)


def prescore(
    db: AnyDatabase,
    matcher: TokenMatcher,
    query: str,
    hits: Sequence[tuple[int, float]],
    cfg: TokenMatchConfig | None = None,
) -> Scored | None:
    """:func:`raw_scores` of one leg's best ``cfg.depth`` hits: the retriever's side
    thread computes them right after the BM25 leg, while the vector leg still runs
    (:mod:`mindfile.retrieve.overlap`), so the search scores only the other candidates
    afterwards. The result is the same either way (None: left to the search)."""
    cfg = cfg or DEFAULT_TOKEN_MATCH_CONFIG
    if cfg.weight <= 0.0 or not hits:
        return None
    q = matcher.query_ids(query)
    return raw_scores(db, matcher, q, [r for r, _ in hits[: cfg.depth]], inline_max=INLINE_MAX)


def apply_token_match(
    db: AnyDatabase,
    fused: dict[int, Fused],
    matcher: TokenMatcher,
    query: str,
    cfg: TokenMatchConfig | None = None,
    *,
    known: Scored | None = None,
) -> None:
    """Add each of the best ``cfg.depth`` candidates' token-match lift to its score
    (``Fused.token_match``; 0.0 for the others), in place (``cfg`` None:
    :data:`DEFAULT_TOKEN_MATCH_CONFIG`, read at call time). ``known``: raw scores
    already computed (:func:`prescore`). Left undone (``token_match`` None) while more
    than :data:`INLINE_MAX` of those candidates wait for a bulk ingest's helper."""
    cfg = cfg or DEFAULT_TOKEN_MATCH_CONFIG
    if cfg.weight <= 0.0 or not fused:
        return
    known = known or _NOTHING
    q = matcher.query_ids(query) if known.query is None else known.query
    top = heapq.nlargest(cfg.depth, fused.values(), key=_score) if len(q) else []
    had = sum(1 for f in top if f.rowid in known.inline)  # tokenised on the side thread
    rest = raw_scores(
        db,
        matcher,
        q,
        [f.rowid for f in top if f.rowid not in known.scores],
        inline_max=INLINE_MAX - had,
    )
    if rest is None:
        return
    for item in fused.values():
        item.token_match = 0.0
    raw = {**known.scores, **rest.scores}
    items = [f for f in top if f.rowid in raw]
    if not items:
        return
    values = [raw[f.rowid] for f in items]
    lo = min(values)
    span = max(max(values) - lo, cfg.width, 1e-12)
    for item, value in zip(items, values, strict=True):
        extra = cfg.weight * (value - lo) / span
        item.token_match = extra
        item.score += extra


def _score(item: Fused) -> tuple[float, int]:
    return (item.score, item.rowid)


# --- the backfill ----------------------------------------------------------------------

_LOCKS: weakref.WeakKeyDictionary[AnyDatabase, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_LOCK = threading.Lock()


def _lock(db: AnyDatabase) -> threading.Lock:
    with _LOCKS_LOCK:
        lock = _LOCKS.get(db)
        if lock is None:
            lock = _LOCKS[db] = threading.Lock()
        return lock


#: Chunk texts :func:`warm_up` tokenises.
WARM_TEXTS = 512


def warm_up(db: AnyDatabase, matcher: TokenMatcher, texts: int = WARM_TEXTS) -> None:
    """Tokenise (and forget) the newest chunks still without a stored set, at most
    ``texts`` of them: what the first search of a process would otherwise pay when it
    tokenises its candidates that have none (up to :data:`INLINE_MAX` while a bulk
    ingest's helper writes them). The word-piece fast path learns each new word once;
    in a fresh process 16 chunks of realistic chat took ~10 ms, ~1 ms after 500 others
    (benchmarks/README.md). Called by the engine's idle follower when a bulk write
    starts (``Mindfile._prepare_reads``), off any search."""
    high = index_source(db).chunk_max_id()
    rows = search_store(db).untokenized_after(max(0, high - texts), texts)
    matcher.token_sets([text for _, text in rows])


def backfill(
    db: AnyDatabase, matcher: TokenMatcher, *, pause: float = _PAUSE, pages: int | None = None
) -> int:
    """Store the token set of every chunk of ``db`` that has none (of the first ``pages``
    pages of them, when given), page by page: each
    page read and tokenised outside any lock and transaction, its sets written in one
    short transaction, ``pause`` seconds between pages (0: no pause, and no offering of
    the interpreter). Returns how many it stored.

    Idempotent and safe beside other writers and other processes doing the same: only
    rows still without a set are written."""
    with _lock(db):
        return _tokenize_all(db, matcher, pause=pause, pages=pages)


def _tokenize_all(
    db: AnyDatabase,
    matcher: TokenMatcher,
    *,
    pause: float,
    pages: int | None = None,
    hand_over: bool = False,
) -> int:
    """The backfill's pages; with ``hand_over`` (this process's background thread) it
    stops between pages once a bulk ingest's helper writes the sets (:func:`defer_to`):
    started before the helper came up, it chased the ingest's writes with the helper
    (~23% of a searching process's time during one; benchmarks/README.md)."""
    store = search_store(db)

    def tokenise(rows: Sequence[tuple[int, str]]) -> int | None:
        sets: list[tuple[int, bytes]] = []
        for i in range(0, len(rows), _SLICE):
            if _stopping(db):
                return None
            part = rows[i : i + _SLICE]
            made = matcher.token_sets([text for _, text in part])
            sets.extend(
                (rowid, found.astype("<u2").tobytes())
                for (rowid, _), found in zip(part, made, strict=True)
            )
            if pause > 0:
                time.sleep(0)  # let a waiting search thread have the interpreter
        store.store_token_sets(sets)
        return len(sets)

    return by_pages(
        lambda after: store.untokenized_after(after, _PAGE),
        tokenise,
        pause=pause,
        pages=pages,
        stopping=lambda: _stopping(db) or (hand_over and deferred(db)),
    )


def _start_backfill(db: AnyDatabase, matcher: TokenMatcher) -> None:
    if deferred(db):
        return
    thread = start_holding(_lock(db), "mindfile-token-sets", _run_backfill, db, matcher)
    if thread is not None:  # else running
        with _LOCKS_LOCK:
            _THREADS[db] = thread


_THREADS: weakref.WeakKeyDictionary[AnyDatabase, threading.Thread] = weakref.WeakKeyDictionary()
_STOPPED: weakref.WeakSet[AnyDatabase] = weakref.WeakSet()


def _stopping(db: AnyDatabase) -> bool:
    return db.closed or db in _STOPPED


def stop(db: AnyDatabase, timeout: float = 30.0) -> None:
    """Stop ``db``'s background backfill, if one runs, and wait for it (at most
    ``timeout`` seconds): the store's ``close()`` calls this before closing the
    database, so no thread is left tokenising when the interpreter exits."""
    with _LOCKS_LOCK:
        _STOPPED.add(db)
        thread = _THREADS.pop(db, None)
    if thread is not None and thread is not threading.current_thread():
        thread.join(timeout)


def _run_backfill(db: AnyDatabase, matcher: TokenMatcher) -> None:
    try:
        started = time.perf_counter()
        n = _tokenize_all(db, matcher, pause=_PAUSE, hand_over=True)
        logger.info("stored the token sets of %d chunks in %.1fs", n, time.perf_counter() - started)
    except Exception as exc:  # a closed store, a busy database: the next search retries
        if not db.closed:
            logger.warning("storing the chunks' token sets failed: %s", exc)
