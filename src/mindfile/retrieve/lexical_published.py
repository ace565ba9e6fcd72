"""A published BM25 generation as one process sees it (:mod:`mindfile.retrieve.lexical`):
which of its documents are alive here (tombstones are per process), their live counts,
and its top k, block-max pruned when a query's postings there are many (with the
window bounds a base stores at publish time, or this process computes and caches)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mindfile._topk import kth_largest
from mindfile.retrieve.lexical_disk import Segment
from mindfile.retrieve.lexical_score import K1, Mask, contribution, doc_mask, live_allowed, top_k
from mindfile.vector.base import VectorFilter

__all__ = ["PRUNE_FROM", "WINDOW_SHIFT", "Published", "published_bounds", "published_top"]

#: Block-max pruning of a published generation (:func:`published_top`): its documents
#: in windows of ``2**WINDOW_SHIFT``, each with an upper bound of every query term's
#: contribution there. Windows must be small for the bounds to be tight: a sum of
#: per-term maxima over a window only approaches a real document's score when the window
#: holds few documents (at 1M chunks, windows of 32 documents leave ~14% of the postings
#: to score, of 1,024 ~97%, of 4,096 all; 16 measured fastest).
WINDOW_SHIFT = 4
#: A query's postings in a generation from which pruning is tried (below: exhaustive).
#: 20,000 was tried (session 14, benchmarks/README.md "The BM25 leg at 1M"): at 1M the
#: L0 generation's queries gained ~0.6 ms at p50 in the BM25 leg and nothing clear end
#: to end, but at 117k searches lost ~0.8 ms (user filters: ~1 ms, build_context ~5).
PRUNE_FROM = 200_000
#: A term's postings from which its window bounds are cached (below: computed per query).
_CACHE_FROM = 1 << 14
#: Bytes of window bounds one generation caches per process (three a window a term:
#: at 1M chunks ~200 KB a term, 64 MB ~330 common terms; least recently computed go).
_CACHE_BYTES = 64 << 20
#: Cached bounds are computed for an average length this much above the current one,
#: so they stay upper bounds while the average grows by up to that much.
_AVGDL_SLACK = 1.02
#: A base generation stores the window bounds of its terms with at least this many
#: postings (:func:`published_bounds`): computing them costs a process ~ms per term and
#: query the first time (at 1M chunks the 438 terms above 65,536 postings hold 79% of
#: the postings, ~82 MB of bounds on disk, mapped and shared by every process).
_STORE_FROM = 1 << 16
#: Terms whose live document count a generation with tombstones caches (per process).
_DF_TERMS = 1 << 16
#: Stored bounds hold for average lengths up to this much above the generation's own
#: (beyond, e.g. after many longer chunks arrive, the per-process cache takes over).
_PUBLISH_SLACK = 1.05
#: A term's contribution divided by its IDF is below ``K1 + 1``: bounds are stored as
#: ``ceil(255 * bound / (K1 + 1))``, one byte.
_QUANT = (K1 + 1.0) / 255.0
#: Relative pad of the window bounds against float rounding (the scores themselves are
#: computed exactly as the exhaustive path computes them).
_PAD = 1e-6
#: Windows scored first (best bounds first; each further batch twice as many), or a
#: 64th of the windows if more.
_FIRST_WINDOWS = 64
#: After the first batch, when the windows scored plus those that can still hold a
#: document of the top k are this share of all windows or more, the automatic choice
#: scores exhaustively instead (the same answer): pruning would read about as many
#: postings at a higher cost each. At 1M chunks, 600 questions: the BM25 leg's p99
#: 39-42 -> 32-34 ms, and with the heap tuning (mindfile._heap) 37-39 -> 21-23 ms, p50
#: unchanged (benchmarks/README.md, "Page faults and pruning at 1M").
GIVE_UP = 0.5
#: When a list, each pruned search appends (windows, batches, windows scored, documents
#: held at the end, or -1 when it gave up for the exhaustive scan) to it (for
#: benchmarks and tests).
STATS: list[tuple[int, int, int, int]] | None = None


@dataclass(frozen=True, slots=True)
class Offsets:
    """Where each window's postings of a term start, relative to its first, in two bytes
    a window: ``high[w >> _SPAN] + low[w]`` (a span of ``2**_SPAN`` windows holds at most
    ``2**(_SPAN + WINDOW_SHIFT)`` postings of a term, below 65,536)."""

    high: npt.NDArray[np.int64]
    low: npt.NDArray[np.uint16]

    @staticmethod
    def pack(off: npt.NDArray[np.int64]) -> Offsets:
        span = _span()
        high = np.ascontiguousarray(off[:: 1 << span])
        low = (off - np.repeat(high, 1 << span)[: len(off)]).astype(np.uint16)
        return Offsets(high, low)

    def __getitem__(self, windows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        out: npt.NDArray[np.int64] = self.high[windows >> _span()] + self.low[windows]
        return out


def _span() -> int:
    return 15 - WINDOW_SHIFT


class Published:
    """One published generation as this process sees it: the mapped arrays, and which
    of its documents are still alive here (tombstones are per process)."""

    def __init__(self, seg: Segment) -> None:
        self.seg = seg
        self.alive = np.ones(len(seg), dtype=bool)
        self.n_alive = len(seg)
        self.total = seg.total_len
        self.dead = 0
        self.windows = (len(seg) + (1 << WINDOW_SHIFT) - 1) >> WINDOW_SHIFT
        #: term number -> (average length the bounds hold up to, the term's largest
        #: ``contribution / idf`` per window quantised upwards, its window offsets)
        self._bounds: dict[int, tuple[float, npt.NDArray[np.uint8], Offsets]]
        self._bounds = {}
        self._lock = threading.Lock()
        #: term number -> its live documents here, while ``dead`` is unchanged (counting
        #: them reads every posting of the term: ~1 ms a query for common terms at 1M)
        self._df: dict[int, int] = {}

    def kill(self, at: int) -> None:
        if self.alive[at]:
            self.alive[at] = False
            self.n_alive -= 1
            self.total -= float(self.seg.doc_len[at])
            self.dead += 1
            self._df.clear()

    def df(self, term: int) -> int:
        """How many live documents hold ``term`` (its number here)."""
        s, e = int(self.seg.post_off[term]), int(self.seg.post_off[term + 1])
        if not self.dead:
            return e - s
        n = self._df.get(term)
        if n is None:
            if len(self._df) >= _DF_TERMS:
                self._df.clear()
            n = self._df[term] = int(np.count_nonzero(self.alive[self.seg.post_doc[s:e]]))
        return n

    def remove(self, rowid: int) -> bool:
        at = self.seg.doc_of(rowid)
        if at is None or not self.alive[at]:
            return False
        self.kill(at)
        return True

    def inherit_bounds(self, other: Published) -> None:
        """Take the window bounds ``other`` (on the same segment) computed: they depend
        on the segment's postings and an average length, not on its tombstones."""
        assert other.seg is self.seg
        with other._lock:
            cached = dict(other._bounds)
        with self._lock:
            self._bounds.update(cached)

    def remove_many(self, rowids: npt.NDArray[np.int64]) -> None:
        """:meth:`remove` of each of ``rowids`` in their order, at once (an L0's
        tombstones of the base: thousands after a bulk ingest, ~3 us each one by one)."""
        at = self.seg.docs_of(rowids)
        _, first = np.unique(at, return_index=True)  # a rowid named twice dies once
        at = at[np.sort(first)]
        at = at[self.alive[at]]
        if not len(at):
            return
        self.alive[at] = False
        self.n_alive -= len(at)
        for length in self.seg.doc_len[at].tolist():  # one by one, as kill() subtracts
            self.total -= length
        self.dead += len(at)
        self._df.clear()

    def bounds(self, term: int, avgdl: float) -> tuple[npt.NDArray[np.uint8], Offsets]:
        """``term``'s largest contribution per window divided by its IDF, quantised
        upwards (an upper bound for any average length up to the cached one), and where
        each window's postings of it start (relative to its first; windows + 1), cached."""
        stored = self.seg.bounds
        if stored is not None and stored.window_shift == WINDOW_SHIFT and avgdl <= stored.cap:
            row = stored.row(term)
            if row is not None:
                return stored.top[row], Offsets(stored.high[row], stored.low[row])
        hit = self._bounds.get(term)
        if hit is not None and avgdl <= hit[0]:
            return hit[1], hit[2]
        seg = self.seg
        cap = avgdl * _AVGDL_SLACK
        s, e = int(seg.post_off[term]), int(seg.post_off[term + 1])
        top, packed = term_bounds(seg.post_doc[s:e], seg.post_tf[s:e], seg.doc_len, cap)
        with self._lock:
            self._bounds.pop(term, None)
            budget = max(1, _CACHE_BYTES // max(1, 3 * self.windows))
            while len(self._bounds) >= budget:
                del self._bounds[next(iter(self._bounds))]
            self._bounds[term] = (cap, top, packed)
        return top, packed


def term_bounds(
    docs: npt.NDArray[np.int32],
    tf: npt.NDArray[np.float32],
    doc_len: npt.NDArray[np.float32],
    cap: float,
) -> tuple[npt.NDArray[np.uint8], Offsets]:
    """One term's window bounds for average lengths up to ``cap`` (its largest
    ``contribution / idf`` per window, quantised upwards) and its packed window offsets."""
    windows = (len(doc_len) + (1 << WINDOW_SHIFT) - 1) >> WINDOW_SHIFT
    g = contribution(1.0, np.asarray(tf, np.float64), doc_len[docs], cap)
    top = _quantise(_window_max(g, docs, windows))
    off = np.zeros(windows + 1, dtype=np.int64)
    np.cumsum(np.bincount(docs >> WINDOW_SHIFT, minlength=windows), out=off[1:])
    return top, Offsets.pack(off)


def published_bounds(arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The window bounds a base generation stores (:func:`lexical_disk.merge`'s
    ``extra``): those of its terms with at least ``_STORE_FROM`` postings, for average
    lengths up to ``_PUBLISH_SLACK`` times its own. The same :func:`term_bounds` as the
    per-process cache, so a search answers the same either way (only the cap differs,
    and a bound for a larger average length is still an upper bound)."""
    post_off = np.asarray(arrays["post_off"], dtype=np.int64)
    doc_len = np.asarray(arrays["doc_len"], dtype=np.float32)
    terms = np.flatnonzero(np.diff(post_off) >= _STORE_FROM)
    if not len(terms) or not len(doc_len):
        return None
    cap = float(doc_len.astype(np.float64).sum()) / len(doc_len) * _PUBLISH_SLACK
    windows = (len(doc_len) + (1 << WINDOW_SHIFT) - 1) >> WINDOW_SHIFT
    span = 1 << _span()
    top = np.empty((len(terms), windows), dtype=np.uint8)
    high = np.empty((len(terms), (windows + span) // span), dtype=np.int64)
    low = np.empty((len(terms), windows + 1), dtype=np.uint16)
    post_doc, post_tf = arrays["post_doc"], arrays["post_tf"]
    for row, term in enumerate(terms.tolist()):
        s, e = int(post_off[term]), int(post_off[term + 1])
        top[row], packed = term_bounds(post_doc[s:e], post_tf[s:e], doc_len, cap)
        high[row], low[row] = packed.high, packed.low
    found = {
        "bound_terms": terms.astype(np.int64),
        "bound_top": top,
        "bound_high": high,
        "bound_low": low,
    }
    return found, {"cap": cap, "window_shift": WINDOW_SHIFT}


def published_top(
    pub: Published,
    wanted: list[tuple[float, int]],
    avgdl: float,
    where: VectorFilter | None,
    k: int,
    prune: bool | None = None,
) -> list[tuple[int, float]]:
    """The top ``k`` of one published generation: block-max pruned when the query's
    postings there are many (``prune`` forces the choice, for tests)."""
    seg = pub.seg
    mask = None
    if where is not None:
        rowids = np.asarray(seg.doc_rowid)
        mask = doc_mask(where, seg.session_codes, np.asarray(seg.doc_session), rowids)
    give_up = None
    if prune is None:
        size = sum(int(seg.post_off[ti + 1]) - int(seg.post_off[ti]) for _, ti in wanted)
        prune = size >= PRUNE_FROM and pub.windows >= 4 * _FIRST_WINDOWS
        give_up = GIVE_UP
    if prune:
        found = top_pruned(pub, wanted, avgdl, mask, k, give_up=give_up)
        if found is not None:
            return found
    parts = []
    for idf, ti in wanted:
        s, e = int(seg.post_off[ti]), int(seg.post_off[ti + 1])
        if e > s:
            docs = seg.post_doc[s:e]
            freq = np.asarray(seg.post_tf[s:e], dtype=np.float64)
            parts.append((docs, contribution(idf, freq, seg.doc_len[docs], avgdl)))
    if not parts:
        return []
    return top_k(parts, len(seg), pub.alive, np.asarray(seg.doc_rowid), mask, k)


def _window_max(
    values: npt.NDArray[np.float64], docs: npt.NDArray[np.int32], windows: int
) -> npt.NDArray[np.float64]:
    """The largest of ``values`` in each window of ``docs`` (ascending); 0 if none."""
    out = np.zeros(windows, dtype=np.float64)
    if len(docs):
        win = docs >> WINDOW_SHIFT
        starts = np.flatnonzero(np.concatenate(([True], win[1:] != win[:-1])))
        out[win[starts]] = np.maximum.reduceat(values, starts)
    return out


def _quantise(bound: npt.NDArray[np.float64]) -> npt.NDArray[np.uint8]:
    """``bound`` (each below ``K1 + 1``) in bytes of ``_QUANT``, rounded up."""
    return np.minimum(np.ceil(bound / _QUANT) + 1.0, 255.0).astype(np.uint8)


def _ranges(starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The concatenated ``arange(s, e)`` of each pair."""
    lens = ends - starts
    total = int(lens.sum())
    shift = starts - np.cumsum(lens) + lens
    out: npt.NDArray[np.int64] = np.arange(total, dtype=np.int64) + np.repeat(shift, lens)
    return out


def _allowed_windows(seg: Segment, mask: tuple[Any, ...], n_win: int) -> npt.NDArray[np.bool_]:
    """The windows of ``seg`` holding at least one document the filter ``mask`` allows."""
    sessions, doc_session, allowed, _doc_rowid = mask
    ok = np.ones(n_win, dtype=bool)
    if allowed is not None:
        at = seg.docs_of(np.asarray(allowed, dtype=np.int64))
        ok[:] = False
        ok[at >> WINDOW_SHIFT] = True
    if sessions is not None:
        in_sessions = np.zeros(n_win, dtype=bool)
        in_sessions[np.flatnonzero(np.isin(doc_session, sessions)) >> WINDOW_SHIFT] = True
        ok &= in_sessions
    return ok


def top_pruned(
    pub: Published,
    wanted: list[tuple[float, int]],
    avgdl: float,
    mask: Mask,
    k: int,
    *,
    give_up: float | None = None,
) -> list[tuple[int, float]] | None:
    """:func:`top_k` of one published generation, skipping the windows of documents that
    cannot reach the top ``k`` (block-max pruning), with exactly its answer; None when
    it gives up (``give_up``: see :data:`GIVE_UP`) for the caller's exhaustive scan.

    A window's bound is the sum over the query's terms of the term's largest
    contribution in it (padded against rounding; for the common terms from per-process
    cached bytes, see :meth:`Published.bounds`). Windows are scored exactly (all the
    query's postings in them, summed in the query's term order as :func:`top_k`'s
    ``bincount`` sums them, with the same :func:`contribution`), best bounds first, in
    batches doubling in size. Once ``k`` live allowed documents are held, the k-th best
    score ``theta`` is a lower bound of the final k-th, and only the windows whose bound
    reaches ``theta`` can hold a document of the top ``k`` or one tied with its last:
    the scan ends when no open window's bound reaches it."""
    seg = pub.seg
    n_win = pub.windows
    bound = np.zeros(n_win, dtype=np.float64)
    # per term: (idf, its postings' span, its window offsets when cached, its
    # contributions when computed up front)
    terms: list[tuple[float, int, int, Offsets | None, npt.NDArray[np.float64] | None]] = []
    for idf, ti in wanted:
        s, e = int(seg.post_off[ti]), int(seg.post_off[ti + 1])
        if e - s >= _CACHE_FROM:
            top, off = pub.bounds(ti, avgdl)
            bound += (idf * _QUANT) * top
            terms.append((idf, s, e, off, None))
        elif e > s:
            docs = seg.post_doc[s:e]
            freq = np.asarray(seg.post_tf[s:e], dtype=np.float64)
            contrib = contribution(idf, freq, seg.doc_len[docs], avgdl)
            bound += _window_max(contrib, docs, n_win)
            terms.append((idf, s, e, None, contrib))
    bound *= 1.0 + _PAD
    if mask is not None:  # windows without an allowed document hold nothing to find
        bound[~_allowed_windows(seg, mask, n_win)] = 0.0
    rank = np.empty(n_win, dtype=np.int64)

    def scored(
        windows: npt.NDArray[np.int64],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """The live allowed documents of ``windows`` (ascending) and their scores."""
        rank[windows] = np.arange(len(windows))
        lo_edge, hi_edge = windows << WINDOW_SHIFT, (windows + 1) << WINDOW_SHIFT
        local_parts: list[npt.NDArray[np.int64]] = []
        weight_parts: list[npt.NDArray[np.float64]] = []
        for idf, s, e, off, contrib in terms:
            post = seg.post_doc[s:e]
            if off is not None:
                at = _ranges(off[windows], off[windows + 1])
            else:
                at = _ranges(np.searchsorted(post, lo_edge), np.searchsorted(post, hi_edge))
            if not len(at):
                continue
            docs = post[at].astype(np.int64)
            if contrib is None:
                freq = seg.post_tf[s:e][at].astype(np.float64)
                weight_parts.append(contribution(idf, freq, seg.doc_len[docs], avgdl))
            else:
                weight_parts.append(contrib[at])
            local_parts.append(
                (rank[docs >> WINDOW_SHIFT] << WINDOW_SHIFT) | (docs & ((1 << WINDOW_SHIFT) - 1))
            )
        if not local_parts:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        sums = np.bincount(
            np.concatenate(local_parts),
            weights=np.concatenate(weight_parts),
            minlength=len(windows) << WINDOW_SHIFT,
        )
        hit = np.flatnonzero(sums > 0.0)
        found: npt.NDArray[np.int64] = (windows[hit >> WINDOW_SHIFT] << WINDOW_SHIFT) | (
            hit & ((1 << WINDOW_SHIFT) - 1)
        )
        keep = live_allowed(found, pub.alive, mask)
        hit_scores = np.asarray(sums[hit][keep], dtype=np.float64)
        return found[keep], hit_scores

    # The best windows first, in growing batches: each raises theta, which closes the
    # windows whose bound is below it.
    open_ = bound > 0.0
    pool_doc, pool_score = np.zeros(0, np.int64), np.zeros(0, np.float64)
    step = max(_FIRST_WINDOWS, n_win >> 6)
    theta, batches, scored_windows = 0.0, 0, 0
    while True:
        todo = np.flatnonzero(open_ & (bound >= theta) if theta > 0.0 else open_)
        if not len(todo):
            break
        if give_up is not None and batches == 1 and scored_windows + len(todo) >= give_up * n_win:
            if STATS is not None:
                STATS.append((n_win, batches, scored_windows, -1))
            return None
        if len(todo) > step:
            todo = np.sort(todo[np.argpartition(-bound[todo], step - 1)[:step]])
        open_[todo] = False
        more_doc, more_score = scored(todo)
        batches, scored_windows = batches + 1, scored_windows + len(todo)
        pool_doc = np.concatenate([pool_doc, more_doc])
        pool_score = np.concatenate([pool_score, more_score])
        if len(pool_doc) >= k:
            theta = kth_largest(pool_score, k)
            # Every score tied with the k-th competes (as in top_k).
            held = pool_score >= theta
            pool_doc, pool_score = pool_doc[held], pool_score[held]
        step *= 2
    if STATS is not None:
        STATS.append((n_win, batches, scored_windows, len(pool_doc)))
    if not len(pool_doc):
        return []
    found = np.asarray(seg.doc_rowid)[pool_doc]
    order = np.lexsort((-found, -pool_score))[:k]
    return [(int(found[i]), float(pool_score[i])) for i in order]
