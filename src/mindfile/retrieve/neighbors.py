"""Neighbour smoothing: a memory next to a strong match in its conversation climbs.

Evidence clusters in conversations: the answer to "what did you do on Saturday?" is
often the turn *after* the one that repeats the question's words, and a detail is
spread over a few adjacent turns. After fusion, each fused candidate gets ``weight``
times the best fused score among the *other* candidates within ``window`` turns of it
in the same session (turns by ``sequence_end``; the chunks of one event are at
distance 0), so such a turn rises next to its strong neighbour. Only fused candidates
lend and receive, and only the strongest ones (``lenders``) and the candidates near
them take part: one indexed query of the search store finds them
(:meth:`~mindfile.storage.search.SearchStore.chunks_around`).

The lift is in the hit's breakdown (``breakdown.neighbors``); ``search(neighbors=False)``
turns it off. Parameters chosen by cross-validation on LoCoMo (benchmarks/README.md,
"Neighbour smoothing").
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass

from mindfile.retrieve.fusion import Fused
from mindfile.storage.backend import AnyDatabase, search_store

__all__ = [
    "DEFAULT_NEIGHBOR_CONFIG",
    "Around",
    "NeighborConfig",
    "apply_neighbors",
    "lift",
    "prefetch",
]


@dataclass(frozen=True, slots=True)
class NeighborConfig:
    """``weight`` 0 turns smoothing off."""

    #: Share of the best neighbour's fused score added to a candidate.
    weight: float = 0.5
    #: How many turns away (``sequence_end`` difference) a neighbour may be.
    window: int = 2
    #: The best ``lenders`` fused candidates lend (and the candidates within ``window``
    #: of them, to each other): one range probe of the session index each, instead of
    #: reading where every candidate sits (~300 lookups, ~0.5 ms at 117k chunks).
    lenders: int = 20


DEFAULT_NEIGHBOR_CONFIG = NeighborConfig()


Around = dict[int, list[tuple[int, str, int]]]


def prefetch(
    db: AnyDatabase, hits: list[tuple[int, float]], cfg: NeighborConfig | None = None
) -> Around:
    """The turns around the best ``lenders`` of one leg's ``hits``, by lender: what
    :func:`apply_neighbors` would read for those of them that end up among the best
    fused candidates. The retriever's side thread reads them right after the BM25 leg,
    while the vector leg still runs (:mod:`mindfile.retrieve.overlap`), so the search
    reads only the other lenders' afterwards. The result is the same either way."""
    cfg = cfg or DEFAULT_NEIGHBOR_CONFIG
    if cfg.weight <= 0.0 or not hits:
        return {}
    return _around(db, sorted(r for r, _ in hits[: cfg.lenders]), cfg.window)


def _around(db: AnyDatabase, rowids: list[int], window: int) -> Around:
    out: Around = {r: [] for r in rowids}
    for lender, rowid, session, seq in search_store(db).chunks_around(rowids, window):
        out[lender].append((rowid, session, seq))
    return out


def apply_neighbors(
    db: AnyDatabase,
    fused: dict[int, Fused],
    cfg: NeighborConfig | None = None,
    *,
    known: Around | None = None,
) -> None:
    """Add each candidate's neighbour lift to its score (``Fused.neighbors``), in place
    (``cfg`` None: :data:`DEFAULT_NEIGHBOR_CONFIG`, read at call time). ``known``: the
    turns around some chunks, already read (:func:`prefetch`)."""
    cfg = cfg or DEFAULT_NEIGHBOR_CONFIG
    if cfg.weight <= 0.0 or not fused:
        return
    lifts: dict[int, float] = {}
    if len(fused) > 1:
        lenders = [f.rowid for f in heapq.nlargest(cfg.lenders, fused.values(), key=_score)]
        known = known or {}
        missing = sorted(r for r in lenders if r not in known)
        read = _around(db, missing, cfg.window) if missing else {}
        positions: dict[int, tuple[str, int]] = {}
        for lender in lenders:
            rows = known[lender] if lender in known else read.get(lender, [])
            for rowid, session, seq in rows:
                if rowid in fused:
                    positions[rowid] = (session, seq)
        lifts = lift({r: fused[r].score for r in positions}, positions, cfg)
    for rowid, item in fused.items():
        extra = lifts.get(rowid, 0.0)
        item.neighbors = extra
        item.score += extra


def _score(item: Fused) -> tuple[float, int]:
    return (item.score, item.rowid)


def lift(
    scores: dict[int, float], positions: dict[int, tuple[str, int]], cfg: NeighborConfig
) -> dict[int, float]:
    """The lift of each rowid of ``scores`` (its best neighbour's score times the
    weight), given each one's ``(session_id, sequence_end)``; rowids without a lift are
    left out."""
    sessions: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for rowid, (session, seq) in positions.items():
        if rowid in scores:
            sessions[session].append((seq, rowid))
    out: dict[int, float] = {}
    w = cfg.window
    for turns in sessions.values():
        if len(turns) < 2:
            continue
        turns.sort()
        n = len(turns)
        for i, (seq, rowid) in enumerate(turns):
            best = 0.0
            j = i - 1
            while j >= 0 and seq - turns[j][0] <= w:
                best = max(best, scores[turns[j][1]])
                j -= 1
            j = i + 1
            while j < n and turns[j][0] - seq <= w:
                best = max(best, scores[turns[j][1]])
                j += 1
            if best > 0.0:
                out[rowid] = cfg.weight * best
    return out
