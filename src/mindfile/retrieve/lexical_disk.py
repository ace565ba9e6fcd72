"""The on-disk side of the BM25 index (:mod:`mindfile.retrieve.lexical`): a published
generation of postings that every process of the machine memory-maps instead of
tokenising the whole store into its own heap.

A generation is a folder ``<store>.index/bm25/<generation>/`` of ``.npy`` arrays (read
with ``mmap_mode="r"``, so the pages are the page cache's, shared by all processes) and
``sessions.json``; ``manifest.json`` beside it names the current one and what it covers
(chunk ids up to ``max_id``, the change log up to ``changes_seq``). Like the ANN bases
(:mod:`mindfile.vector.ann_disk`) it is derived, never the source of truth: stale, damaged
or foreign generations are ignored and rebuilt; one builder at a time holds the folder's
``build.lock``.

Arrays (``T`` terms, ``D`` documents, ``P`` postings):

* ``term_hash`` (T, int64, ascending): 64-bit BLAKE2b of each term, the lookup key;
* ``term_off`` (T+1, int64) into ``term_bytes`` (uint8): each term's UTF-8 text, so a
  lookup checks the text and a hash collision can never merge two terms;
* ``post_off`` (T+1, int64) into ``post_doc`` (P, int32, ascending per term) and
  ``post_tf`` (P, float32): the column-weighted term frequency, as FTS5 weighs it;
* ``doc_rowid`` (D, int64, ascending), ``doc_len`` (D, float32: tokens in all columns),
  ``doc_session`` (D, int32: index into ``sessions.json``);
* ``dead`` (int64, only in an L0 generation): base chunks it replaces or deletes;
* optional, with ``bounds.json`` (``cap``, ``window_shift``): block-max window bounds of
  the common terms, computed once at publish time so no process computes them per query
  (:func:`mindfile.retrieve.lexical_published.published_bounds`): ``bound_terms`` (B, int64,
  ascending term numbers), ``bound_top`` (B x windows, uint8), ``bound_high`` and
  ``bound_low`` (each term's packed window offsets). A generation without them, or with
  bounds of another window size, is read as before (bounds computed per process).

A published set is a large *base* and at most one small *L0* generation holding what
came after it: publishing the recent delta rewrites only the L0 (cost of the delta),
and the L0 is folded into a new base once it reaches a quarter of it (geometric: each
posting is rewritten a bounded number of times).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mindfile.vector.ann_disk import fsync_dir, load_array, save_json

__all__ = [
    "FORMAT",
    "Cancelled",
    "Extra",
    "Flat",
    "LexManifest",
    "Segment",
    "StoredBounds",
    "collect",
    "merge",
    "term_hash",
]

logger = logging.getLogger("mindfile.retrieve")

FORMAT = 1
_ARRAYS = (
    "term_hash",
    "term_off",
    "term_bytes",
    "post_off",
    "post_doc",
    "post_tf",
    "doc_rowid",
    "doc_len",
    "doc_session",
)
_BOUND_ARRAYS = ("bound_terms", "bound_top", "bound_high", "bound_low")
#: Computes a generation's optional arrays from its required ones (``merge``'s hook):
#: ``(arrays, bounds.json contents)``, or None for none.
Extra = Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, Any]] | None]


class Cancelled(Exception):
    """A merge given up before its generation was written (``merge``'s ``cancelled``
    answered True): nothing of it is left on disk."""


def _check(cancelled: Callable[[], bool] | None) -> None:
    if cancelled is not None and cancelled():
        raise Cancelled


def term_hash(term: str) -> int:
    """The signed 64-bit key a term is looked up by."""
    digest = hashlib.blake2b(term.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


@dataclass(frozen=True, slots=True)
class LexManifest:
    """What a published generation holds (``manifest.json``)."""

    store: str
    #: The tokenizer and column weights the postings were made with.
    analyzer: str
    #: The base generation, its documents, postings and summed lengths.
    generation: str
    max_id: int
    changes_seq: int
    docs: int
    postings: int
    total_len: float
    built_at: str
    format: int = FORMAT
    #: A small second generation of what came after the base (``None``: none), with
    #: the base chunks it replaces or deletes: writing it costs the delta, not the base.
    l0: str | None = None
    l0_docs: int = 0
    l0_postings: int = 0
    l0_total_len: float = 0.0

    def segments(self) -> list[tuple[str, int, int, float]]:
        """``(generation, docs, postings, total_len)`` of the base, then of the L0."""
        out = [(self.generation, self.docs, self.postings, self.total_len)]
        if self.l0 is not None:
            out.append((self.l0, self.l0_docs, self.l0_postings, self.l0_total_len))
        return out

    @classmethod
    def load(cls, path: Path) -> LexManifest | None:
        """The manifest at ``path``; None when missing, unreadable or of another format."""
        try:
            manifest = cls(**json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            logger.warning("ignoring unreadable BM25 manifest %s: %s", path, exc)
            return None
        return manifest if manifest.format == FORMAT else None

    def save(self, path: Path) -> None:
        save_json(path, asdict(self))


class Segment:
    """A published generation, memory-mapped (read-only)."""

    def __init__(
        self, folder: Path, generation: str, docs: int, postings: int, total_len: float
    ) -> None:
        where = folder / generation
        # load_array maps each array as a plain view, one header parse at a time.
        arrays: dict[str, Any] = {name: load_array(where / f"{name}.npy") for name in _ARRAYS}
        sessions = json.loads((where / "sessions.json").read_text(encoding="utf-8"))
        dead = where / "dead.npy"
        self.dead: npt.NDArray[np.int64] = (
            load_array(dead, mapped=False) if dead.exists() else np.zeros(0, np.int64)
        )
        self.generation = generation
        self.expected = (docs, postings)
        self.total_len = total_len
        self.term_hash: npt.NDArray[np.int64] = arrays["term_hash"]
        self.term_off: npt.NDArray[np.int64] = arrays["term_off"]
        self.term_bytes: npt.NDArray[np.uint8] = arrays["term_bytes"]
        self.post_off: npt.NDArray[np.int64] = arrays["post_off"]
        self.post_doc: npt.NDArray[np.int32] = arrays["post_doc"]
        self.post_tf: npt.NDArray[np.float32] = arrays["post_tf"]
        self.doc_rowid: npt.NDArray[np.int64] = arrays["doc_rowid"]
        self.doc_len: npt.NDArray[np.float32] = arrays["doc_len"]
        self.doc_session: npt.NDArray[np.int32] = arrays["doc_session"]
        self.sessions: list[str] = [str(s) for s in sessions]
        self.session_codes = {s: i for i, s in enumerate(self.sessions)}
        self._check()
        #: Stored window bounds (see the module docstring); None when absent or unusable.
        self.bounds: StoredBounds | None = _load_bounds(where, len(self.doc_rowid))

    def _check(self) -> None:
        """Shapes that must agree; a damaged generation raises here, not mid-search."""
        t, d = len(self.term_hash), len(self.doc_rowid)
        docs, postings = self.expected
        ok = (
            len(self.term_off) == t + 1
            and len(self.post_off) == t + 1
            and int(self.term_off[-1]) == len(self.term_bytes)
            and int(self.post_off[-1]) == len(self.post_doc) == len(self.post_tf)
            and len(self.post_doc) == postings
            and len(self.doc_len) == len(self.doc_session) == d == docs
        )
        if not ok:
            raise ValueError(f"BM25 generation {self.generation} does not match its manifest")

    def __len__(self) -> int:
        return len(self.doc_rowid)

    def term_index(self, term: str) -> int | None:
        """The number of ``term`` in this generation, or None."""
        key = term_hash(term)
        i = int(np.searchsorted(self.term_hash, key))
        if i >= len(self.term_hash) or int(self.term_hash[i]) != key:
            return None
        text = bytes(self.term_bytes[int(self.term_off[i]) : int(self.term_off[i + 1])])
        if text != term.encode("utf-8", "surrogatepass"):
            return None  # a hash collision with another term: not this one
        return i

    def postings(self, term: str) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]] | None:
        """The documents holding ``term`` and their weighted frequencies (views)."""
        i = self.term_index(term)
        if i is None:
            return None
        s, e = int(self.post_off[i]), int(self.post_off[i + 1])
        return self.post_doc[s:e], self.post_tf[s:e]

    def flat(self, alive: npt.NDArray[np.bool_]) -> Flat:
        """Its postings as a :class:`Flat` (to fold a small generation into a merge)."""
        offs, blob = np.asarray(self.term_off), np.asarray(self.term_bytes)
        terms = [
            blob[offs[i] : offs[i + 1]].tobytes().decode("utf-8", "surrogatepass")
            for i in range(len(self.term_hash))
        ]
        return Flat(
            terms=terms,
            counts=np.diff(np.asarray(self.post_off, dtype=np.int64)).astype(np.int64),
            doc=np.asarray(self.post_doc, dtype=np.int32),
            tf=np.asarray(self.post_tf, dtype=np.float32),
            rowid=np.asarray(self.doc_rowid, dtype=np.int64),
            length=np.asarray(self.doc_len, dtype=np.float32),
            session=[self.sessions[c] for c in np.asarray(self.doc_session).tolist()],
            alive=alive,
        )

    def doc_of(self, rowid: int) -> int | None:
        """The document number of chunk ``rowid``, or None."""
        i = int(np.searchsorted(self.doc_rowid, rowid))
        if i < len(self.doc_rowid) and int(self.doc_rowid[i]) == rowid:
            return i
        return None

    def docs_of(self, rowids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The document numbers of those of ``rowids`` this generation holds, in their
        order (:meth:`doc_of` of many)."""
        doc_rowid = np.asarray(self.doc_rowid)
        at = np.searchsorted(doc_rowid, rowids)
        inside = at < len(doc_rowid)
        found: npt.NDArray[np.int64] = at[inside][doc_rowid[at[inside]] == rowids[inside]]
        return found


@dataclass(frozen=True, slots=True)
class StoredBounds:
    """A generation's published window bounds (mapped): row ``j`` is term
    ``terms[j]``'s, computed for average lengths up to ``cap`` with windows of
    ``2**window_shift`` documents."""

    terms: npt.NDArray[np.int64]
    top: npt.NDArray[np.uint8]
    high: npt.NDArray[np.int64]
    low: npt.NDArray[np.uint16]
    cap: float
    window_shift: int

    def row(self, term: int) -> int | None:
        """The row of term number ``term``, or None when it has no stored bounds."""
        j = int(np.searchsorted(self.terms, term))
        return j if j < len(self.terms) and int(self.terms[j]) == term else None


def _load_bounds(where: Path, docs: int) -> StoredBounds | None:
    meta_path = where / "bounds.json"
    if not meta_path.exists():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        shift, cap = int(meta["window_shift"]), float(meta["cap"])
        got = {name: load_array(where / f"{name}.npy") for name in _BOUND_ARRAYS}
        windows = (docs + (1 << shift) - 1) >> shift
        span = 1 << max(0, 15 - shift)
        n = len(got["bound_terms"])
        shapes_ok = (
            got["bound_top"].shape == (n, windows)
            and got["bound_low"].shape == (n, windows + 1)
            and got["bound_high"].shape == (n, (windows + span) // span)
            and bool(np.all(np.diff(got["bound_terms"]) > 0))
        )
        if not shapes_ok:
            raise ValueError("shapes do not match the generation")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.warning("ignoring the stored BM25 bounds of %s: %s", where.name, exc)
        return None
    return StoredBounds(
        got["bound_terms"], got["bound_top"], got["bound_high"], got["bound_low"], cap, shift
    )


@dataclass(slots=True)
class Flat:
    """Postings in flat arrays (the in-memory delta's, copied out to be persisted).

    ``terms[i]`` is the text of term ``i``; its ``counts[i]`` postings come next in
    ``doc`` (the documents holding it) and ``tf`` (its weighted frequency there).
    Documents are numbered ``0..len(rowid)-1``; only those with ``alive`` set are kept.
    """

    terms: list[str]
    counts: npt.NDArray[np.int64]
    doc: npt.NDArray[np.int32]
    tf: npt.NDArray[np.float32]
    rowid: npt.NDArray[np.int64]
    length: npt.NDArray[np.float32]
    session: list[str]
    alive: npt.NDArray[np.bool_]


def merge(
    folder: Path,
    base: Segment | None,
    base_alive: npt.NDArray[np.bool_] | None,
    delta: Flat,
    dead: npt.NDArray[np.int64] | None = None,
    extra: Extra | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[str, int, int, float]:
    """Write a new generation holding ``base``'s live documents and ``delta``'s (and,
    for an L0 generation, ``dead``: the rowids it tombstones in the base below it;
    ``extra`` adds optional arrays computed from the others, e.g. window bounds).

    Returns ``(generation, docs, postings, total_len)``. Nothing is published: the caller
    writes the manifest. A chunk in both (updated after ``base`` was written) must be
    dead in ``base_alive``; the caller's tombstones guarantee it. ``cancelled`` is asked
    between the steps (and the files): when it answers True, the merge raises
    :class:`Cancelled` and leaves nothing behind (a full merge at ~150k chunks takes
    seconds; a quicker publish may want the build lock meanwhile).
    """
    # Documents: the live ones of both, renumbered in rowid order.
    if base is not None:
        assert base_alive is not None
        b_keep = np.flatnonzero(base_alive)
        b_rowid = np.asarray(base.doc_rowid)[b_keep]
        b_len = np.asarray(base.doc_len)[b_keep]
        b_sess = np.asarray(base.doc_session)[b_keep].astype(np.int64)
        sessions = list(base.sessions)
    else:
        b_keep = np.zeros(0, np.int64)
        b_rowid, b_len, b_sess = np.zeros(0, np.int64), np.zeros(0, np.float32), b_keep
        sessions = []
    codes = {s: i for i, s in enumerate(sessions)}
    d_keep = np.flatnonzero(delta.alive)
    d_sess = np.fromiter(
        (codes.setdefault(delta.session[i], len(codes)) for i in d_keep.tolist()),
        np.int64,
        len(d_keep),
    )
    sessions = list(codes)
    rowid = np.concatenate([b_rowid, delta.rowid[d_keep]])
    order = np.argsort(rowid, kind="stable")
    if len(rowid) > 1 and np.any(np.diff(rowid[order]) == 0):
        raise ValueError("a chunk is in both the base and the delta")
    new_of = np.empty(len(rowid), np.int64)
    new_of[order] = np.arange(len(rowid))
    b_new = np.full(len(base) if base is not None else 0, -1, np.int64)
    b_new[b_keep] = new_of[: len(b_keep)]
    d_new = np.full(len(delta.rowid), -1, np.int64)
    d_new[d_keep] = new_of[len(b_keep) :]

    _check(cancelled)
    # Terms: the union of both vocabularies, ordered by hash.
    d_hash = np.fromiter((term_hash(t) for t in delta.terms), np.int64, len(delta.terms))
    b_hash = np.asarray(base.term_hash) if base is not None else np.zeros(0, np.int64)
    u_hash = np.union1d(b_hash, d_hash)
    if base is not None and len(base.term_hash):
        b_index = np.searchsorted(u_hash, b_hash)
    else:
        b_index = np.zeros(0, np.int64)
    d_index = np.searchsorted(u_hash, d_hash)

    _check(cancelled)
    # Postings as sortable keys (term index << 32 | new document), both sides sorted.
    keys_parts: list[npt.NDArray[np.int64]] = []
    tf_parts: list[npt.NDArray[np.float32]] = []
    if base is not None and len(base.post_doc):
        counts = np.diff(np.asarray(base.post_off, dtype=np.int64)).astype(np.int64)
        b_term = np.repeat(b_index, counts)
        b_doc = b_new[np.asarray(base.post_doc)]
        live = b_doc >= 0
        # base postings are sorted by (hash, doc) and renumbering keeps rowid order
        keys_parts.append((b_term[live] << 32) | b_doc[live])
        tf_parts.append(np.asarray(base.post_tf)[live])
        _check(cancelled)
    if len(delta.doc):
        d_doc = d_new[delta.doc]
        live = d_doc >= 0
        d_term = np.repeat(d_index, delta.counts)
        d_keys = (d_term[live] << 32) | d_doc[live]
        d_order = np.argsort(d_keys, kind="stable")
        keys_parts.append(d_keys[d_order])
        tf_parts.append(delta.tf[live][d_order])
    _check(cancelled)
    if len(keys_parts) == 2:
        a, b = keys_parts
        at = np.searchsorted(a, b) + np.arange(len(b))
        keys = np.empty(len(a) + len(b), np.int64)
        tf = np.empty(len(a) + len(b), np.float32)
        mask = np.ones(len(keys), bool)
        mask[at] = False
        keys[at], tf[at] = b, tf_parts[1]
        keys[mask], tf[mask] = a, tf_parts[0]
    elif keys_parts:
        keys, tf = keys_parts[0], tf_parts[0]
    else:
        keys, tf = np.zeros(0, np.int64), np.zeros(0, np.float32)
    _check(cancelled)
    post_term = keys >> 32
    post_doc = (keys & 0xFFFFFFFF).astype(np.int32)

    # Drop terms no live document holds any more.
    per_term = np.bincount(post_term, minlength=len(u_hash))
    used = np.flatnonzero(per_term)
    post_off = np.zeros(len(used) + 1, np.int64)
    np.cumsum(per_term[used], out=post_off[1:])
    text_of: dict[int, bytes] = {}
    if base is not None:
        offs, blob = np.asarray(base.term_off), np.asarray(base.term_bytes)
        for i, u in enumerate(b_index.tolist()):
            text_of[u] = blob[offs[i] : offs[i + 1]].tobytes()
    for i, u in enumerate(d_index.tolist()):
        text_of.setdefault(u, delta.terms[i].encode("utf-8", "surrogatepass"))
    texts = [text_of[u] for u in used.tolist()]
    term_off = np.zeros(len(texts) + 1, np.int64)
    np.cumsum([len(t) for t in texts], out=term_off[1:])

    length = np.concatenate([b_len, delta.length[d_keep]])[order].astype(np.float32)
    session = np.concatenate([b_sess, d_sess])[order].astype(np.int32)
    generation = uuid.uuid4().hex[:12]
    arrays: dict[str, npt.NDArray[Any]] = {
        "term_hash": u_hash[used],
        "term_off": term_off,
        "term_bytes": np.frombuffer(b"".join(texts), np.uint8),
        "post_off": post_off,
        "post_doc": post_doc,
        "post_tf": tf,
        "doc_rowid": rowid[order],
        "doc_len": length,
        "doc_session": session,
    }
    if dead is not None:
        arrays["dead"] = np.asarray(dead, dtype=np.int64)
    _check(cancelled)
    more = extra(arrays) if extra is not None else None
    files: dict[str, Any] = {}
    if more is not None:
        arrays.update(more[0])
        files["bounds.json"] = more[1]
    _write(folder / generation, arrays, sessions, files, cancelled)
    return generation, len(rowid), len(post_doc), float(length.astype(np.float64).sum())


def _write(
    where: Path,
    arrays: dict[str, npt.NDArray[Any]],
    sessions: Sequence[str],
    files: dict[str, Any] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> None:
    tmp = where.with_name(f".{where.name}.tmp")
    tmp.mkdir(parents=True)
    try:
        for name, array in arrays.items():
            _check(cancelled)
            with open(tmp / f"{name}.npy", "wb") as fh:
                np.save(fh, np.ascontiguousarray(array), allow_pickle=False)
                fh.flush()
                os.fsync(fh.fileno())
        for name, doc in {"sessions.json": list(sessions), **(files or {})}.items():
            with open(tmp / name, "w", encoding="utf-8") as fh:
                json.dump(doc, fh)
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, where)
        fsync_dir(where.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def collect(folder: Path, keep: Sequence[str | None]) -> None:
    """Remove generations not in ``keep`` (and unfinished ones). Processes that still
    map a removed generation keep reading it: the kernel frees it with the last mapping."""
    try:
        children = list(folder.iterdir())
    except FileNotFoundError:
        return
    for child in children:
        if child.is_dir() and child.name not in keep:
            shutil.rmtree(child, ignore_errors=True)
