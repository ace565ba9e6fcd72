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

from mindfile.retrieve.lexical_batch import Batch, analyse_batch
from mindfile.retrieve.lexical_disk import Flat, LexManifest, Segment
from mindfile.retrieve.lexical_published import Published, published_top
from mindfile.retrieve.lexical_score import IDF_FLOOR, Mask, contribution, doc_mask, top_k
from mindfile.vector.base import VectorFilter

__all__ = ["Batch", "Delta", "Frozen", "State", "analyse_batch"]


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
        return docs, contribution(idf, freq, lengths, avgdl)

    def mask(self, where: VectorFilter | None) -> Mask:
        if where is None:
            return None
        return doc_mask(
            where,
            self.session_codes,
            np.frombuffer(self.doc_session, dtype=np.int32),
            np.frombuffer(self.doc_rowid, dtype=np.int64),
        )


@dataclass(frozen=True)
class Frozen:
    """What a merge publishes (:meth:`State.freeze`), taken under the index lock: the
    frozen deltas and the published generations, each with its alive flags then, and
    what the new generation covers. The merge reads it without any lock."""

    deltas: list[Delta]
    alive: list[npt.NDArray[np.bool_]]
    base: Segment | None
    base_alive: npt.NDArray[np.bool_] | None
    l0: Segment | None
    l0_alive: npt.NDArray[np.bool_] | None
    full_due: bool
    max_id: int
    changes_seq: int
    manifest: LexManifest | None

    def flats(self) -> list[Flat]:
        """The frozen deltas' postings, their dead documents left out."""
        return [d.flat(a) for d, a in zip(self.deltas, self.alive, strict=True)]


class State:
    """One consistent view of the index: the published generations (a base and maybe
    an L0, memory-mapped, shared with other processes) plus in-memory deltas of what
    came after them (new chunks, and chunks changed since, whose published copy is
    tombstoned): the live delta, and while a merge runs, the frozen one it publishes."""

    def __init__(self, manifest: LexManifest | None = None, segs: Sequence[Segment] = ()) -> None:
        self.manifest = manifest
        self.published = [Published(seg) for seg in segs]
        if len(self.published) == 2:  # the L0 replaces or deletes some base chunks
            base, l0 = self.published
            base.remove_many(np.asarray(l0.seg.dead, dtype=np.int64))
        self.max_rowid = manifest.max_id if manifest is not None else 0
        self.changes_seen = manifest.changes_seq if manifest is not None else 0
        self.data_version: tuple[int, int] | None = None
        self.ready = False
        self.delta = Delta()
        #: Deltas being published by a merge (normally none; one while a merge runs).
        self.frozen: list[Delta] = []
        #: While a merge runs: the newest chunk id it publishes, and every chunk id up to
        #: it removed since (deleted, or changed and re-added to the live delta). The
        #: published generation's state needs those tombstones to take over the live
        #: delta (``Bm25Index._carry``) instead of tokenising its chunks again.
        self.frozen_through = 0
        self.removed_since: list[int] | None = None

    def reset(self) -> None:
        """Forget everything, the published generations too (then catch up from nothing)."""
        self.__dict__.update(State().__dict__)

    def deltas(self) -> list[Delta]:
        return [*self.frozen, self.delta]

    @property
    def base(self) -> Published | None:
        return self.published[0] if self.published else None

    @property
    def l0(self) -> Published | None:
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

    def freeze(self, *, l0_fraction: float, prefer_l0: bool) -> Frozen:
        """Start publishing (under the index lock): the live delta joins the frozen ones
        (nothing is added to them any more) and a new one takes what comes; returns
        what the merge publishes. A new base is due (``Frozen.full_due``) when there is
        none, when the L0 would reach ``l0_fraction`` of the base (unless ``prefer_l0``),
        or when tombstones reach a quarter of the base."""
        self.frozen.append(self.delta)
        self.delta = Delta()
        self.frozen_through, self.removed_since = self.max_rowid, []
        base, l0 = self.base, self.l0
        recent = sum(d.n_alive for d in self.frozen) + (l0.n_alive if l0 else 0)
        return Frozen(
            deltas=list(self.frozen),
            alive=[np.frombuffer(d.alive, dtype=np.int8).astype(bool) for d in self.frozen],
            base=base.seg if base is not None else None,
            base_alive=base.alive.copy() if base is not None else None,
            l0=l0.seg if l0 is not None else None,
            l0_alive=l0.alive.copy() if l0 is not None else None,
            full_due=(
                base is None
                or self.manifest is None
                or (not prefer_l0 and recent >= l0_fraction * base.n_alive)
                or base.dead > max(1024, len(base.seg) // 4)
            ),
            max_id=self.max_rowid,
            changes_seq=self.changes_seen,
            manifest=self.manifest,
        )

    def take_over(self, held: State) -> None:
        """Become ``held`` on newer published generations: its live delta, and how far it
        caught up (``held``'s frozen deltas are in them; the caller has applied the
        tombstones of what was removed since they froze)."""
        self.delta = held.delta
        self.max_rowid, self.changes_seen = held.max_rowid, held.changes_seen
        self.data_version, self.ready = held.data_version, held.ready

    def remove(self, rowid: int) -> None:
        if self.removed_since is not None and rowid <= self.frozen_through:
            self.removed_since.append(rowid)
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
        return delta or self.published_compact_soon()

    def published_compact_soon(self) -> bool:
        """:meth:`compact_soon` for the published generations only."""
        return any(p.dead > max(1024, len(p.seg) // 4) for p in self.published)

    # -- scoring ------------------------------------------------------------------------

    def postings(self, terms: Sequence[str]) -> list[int]:
        """How many postings each term has over all parts (what scoring it reads;
        documents deleted since a part was written included)."""
        out = []
        for term in terms:
            n = 0
            for pub in self.published:
                ti = pub.seg.term_index(term)
                if ti is not None:
                    n += int(pub.seg.post_off[ti + 1]) - int(pub.seg.post_off[ti])
            for delta in self.deltas():
                tid = delta.term_ids.get(term)
                n += delta.df[tid] if tid is not None else 0
            out.append(n)
        return out

    def score(
        self,
        terms: list[str],
        k: int,
        where: VectorFilter | None,
        weights: Sequence[float] | None = None,
    ) -> list[tuple[int, float]]:
        """The top ``k`` of all parts together, with the statistics of all; with
        ``weights`` (one positive number per term), each term's contribution scaled by
        its weight."""
        n_alive = self.docs
        if n_alive == 0:
            return []
        deltas = self.deltas()
        total = sum(p.total for p in self.published) + sum(d.total_len for d in deltas)
        avgdl = total / n_alive
        #: per published generation: (idf, term number) of the query's terms it holds
        pub_terms: list[list[tuple[float, int]]] = [[] for _ in self.published]
        delta_parts: list[list[tuple[npt.NDArray[np.int32], npt.NDArray[np.float64]]]] = [
            [] for _ in deltas
        ]
        for at, term in enumerate(terms):
            found = [p.seg.term_index(term) for p in self.published]
            n = 0
            for pub, ti in zip(self.published, found, strict=True):
                if ti is not None:
                    n += pub.df(ti)
            for delta in deltas:
                tid = delta.term_ids.get(term)
                n += delta.df[tid] if tid is not None else 0
            if n <= 0:
                continue
            idf = max(math.log((n_alive - n + 0.5) / (n + 0.5)), IDF_FLOOR)
            if weights is not None:  # a weighted query: the term's IDF scaled (bounds too)
                idf *= weights[at]
            for ti, wanted in zip(found, pub_terms, strict=True):
                if ti is not None:
                    wanted.append((idf, ti))
            for delta, parts in zip(deltas, delta_parts, strict=True):
                part = delta.scored(term, idf, avgdl)
                if part is not None:
                    parts.append(part)
        hits: list[tuple[int, float]] = []
        for pub, wanted in zip(self.published, pub_terms, strict=True):
            if wanted:
                hits += published_top(pub, wanted, avgdl, where, k)
        for delta, parts in zip(deltas, delta_parts, strict=True):
            if parts:
                hits += top_k(
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
