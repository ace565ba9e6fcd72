"""The state of the BM25 index (:mod:`mindfile.retrieve.lexical`): the published
generations as one process sees them (their alive masks), its in-memory deltas, and
scoring over all of them with shared statistics (FTS5's ``bm25()`` formula)."""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mindfile.retrieve.lexical_disk import Flat, LexManifest, Segment
from mindfile.vector.base import VectorFilter

__all__ = ["IDF_FLOOR", "K1", "B", "Batch", "Delta", "State", "analyse_batch", "combine"]

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6


class _Ids(dict[str, int]):
    """Terms numbered in order of first appearance (the lookup stays in C)."""

    def __missing__(self, key: str) -> int:
        value = self[key] = len(self)
        return value


@dataclass(frozen=True)
class Batch:
    """Several documents analysed at once: their postings as flat arrays sorted by
    (term, document), terms and documents numbered within the batch."""

    rowids: list[int]
    sessions: list[str]
    terms: list[str]
    pair_term: npt.NDArray[np.int32]
    pair_doc: npt.NDArray[np.int32]
    pair_tf: npt.NDArray[np.float32]
    lengths: npt.NDArray[np.float32]


def analyse_batch(
    rowids: list[int],
    sessions: list[str],
    columns: list[list[list[str]]],
    weights: Sequence[float],
) -> Batch:
    """A :class:`Batch` from each document's tokens per column (``columns[doc][col]``).

    The term frequency of a term in a document is the column-weighted count, as FTS5's
    ``bm25()`` weighs columns; the document's length is its token count over all columns.
    Per token only C-level work runs (``list.extend``, a dict lookup through ``map``);
    counting is one sort of ``(term, doc)`` keys. ~3x faster than a dict per document.
    """
    n_docs = len(rowids)
    tokens: list[str] = []
    sizes: list[int] = []
    for doc_columns in columns:
        for toks in doc_columns:
            tokens.extend(toks)
            sizes.append(len(toks))
    ids = _Ids()
    term = np.fromiter(map(ids.__getitem__, tokens), dtype=np.int64, count=len(tokens))
    per_col = np.asarray(sizes, dtype=np.int64).reshape(n_docs, len(weights))
    doc = np.repeat(np.arange(n_docs, dtype=np.int64), per_col.sum(axis=1))
    weight = np.repeat(np.tile(np.asarray(weights, dtype=np.float64), n_docs), per_col.ravel())
    key = (term << 32) | doc
    order = np.argsort(key)
    key = key[order]
    if len(key):
        starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        tf = np.add.reduceat(weight[order], starts)
        key = key[starts]
    else:
        tf = np.zeros(0, dtype=np.float64)
    return Batch(
        rowids=rowids,
        sessions=sessions,
        terms=list(ids),
        pair_term=(key >> 32).astype(np.int32),
        pair_doc=(key & 0xFFFFFFFF).astype(np.int32),
        pair_tf=tf.astype(np.float32),
        lengths=per_col.sum(axis=1).astype(np.float32),
    )


class Delta:
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
        self.doc_terms: list[npt.NDArray[np.int32] | None] = []
        self.alive = array("b")
        self.doc_of: dict[int, int] = {}
        self.session_codes: dict[str, int] = {}
        self.n_alive = 0
        self.total_len = 0.0
        self.dead = 0

    def add_batch(self, batch: Batch) -> None:
        """Add a :class:`Batch` of documents (none of them held yet)."""
        doc0 = len(self.doc_rowid)
        n_docs = len(batch.rowids)
        term_ids, df = self.term_ids, self.df
        tids = np.empty(len(batch.terms), dtype=np.int32)
        for j, token in enumerate(batch.terms):
            tid = term_ids.get(token)
            if tid is None:
                tid = len(df)
                df.append(0)
                self.post_docs.append(array("i"))
                self.post_tf.append(array("f"))
                term_ids[token] = tid
            tids[j] = tid
        pair_term = batch.pair_term
        docs = batch.pair_doc + np.int32(doc0)
        tf = batch.pair_tf
        if len(pair_term):
            bounds = np.flatnonzero(pair_term[1:] != pair_term[:-1]) + 1
            starts = np.concatenate(([0], bounds)).tolist()
            ends = np.concatenate((bounds, [len(pair_term)])).tolist()
            post_docs, post_tf = self.post_docs, self.post_tf
            for s, e, tid in zip(starts, ends, tids[pair_term[starts]].tolist(), strict=True):
                post_docs[tid].frombytes(docs[s:e].tobytes())
                post_tf[tid].frombytes(tf[s:e].tobytes())
                df[tid] += e - s
        by_doc = np.argsort(batch.pair_doc, kind="stable")
        per_doc = np.bincount(batch.pair_doc, minlength=n_docs)
        self.doc_terms.extend(np.split(tids[pair_term[by_doc]], np.cumsum(per_doc)[:-1]))
        codes = self.session_codes
        self.doc_session.extend(codes.setdefault(s, len(codes)) for s in batch.sessions)
        self.doc_rowid.extend(batch.rowids)
        self.doc_len.frombytes(batch.lengths.astype(np.float32).tobytes())
        self.alive.frombytes(b"\x01" * n_docs)
        self.doc_of.update(zip(batch.rowids, range(doc0, doc0 + n_docs), strict=True))
        self.n_alive += n_docs
        self.total_len += float(batch.lengths.sum(dtype=np.float64))

    def remove(self, rowid: int) -> bool:
        doc = self.doc_of.pop(rowid, None)
        if doc is None:
            return False
        terms = self.doc_terms[doc]
        for tid in terms.tolist() if terms is not None else ():
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


class State:
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
        self.delta = Delta()
        #: Deltas being published by a merge (normally none; one while a merge runs).
        self.frozen: list[Delta] = []

    def reset(self) -> None:
        """Forget everything, the published generations too (then catch up from nothing)."""
        self.__dict__.update(State().__dict__)

    def deltas(self) -> list[Delta]:
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

    def add_batch(self, batch: Batch) -> None:
        for rowid in batch.rowids:
            self.remove(rowid)
        self.delta.add_batch(batch)
        if batch.rowids:
            self.max_rowid = max(self.max_rowid, max(batch.rowids))

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


def combine(flats: list[Flat]) -> Flat:
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
