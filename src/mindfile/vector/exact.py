"""The default vector index: exact cosine search over in-memory numpy arrays.

It mirrors ``chunks_vec``. Catching up is incremental: chunk ids only grow
(AUTOINCREMENT), so new vectors are those above the highest id held; vectors that
arrived out of id order, were rewritten or were deleted are re-read from
``chunks_vec_changes`` (a logged id that is gone from SQLite is dropped).

Searching. Below :data:`QUANTIZE_FROM` vectors (50k) a search is one float32 product,
row by row (``np.vecdot``: 3.9 ms at 117k x 256 on one core of the reference machine,
where BLAS's matrix-vector kernel took 6 ms on two). Above it a search reads less
instead, over compact codes of the *centred* vectors (the store's mean vector
subtracted: the bundled model's vectors share a large common component that would
otherwise swamp every code): per-vector int8 codes, each with a bound on its
quantisation error.

* With ``simsimd`` (a core dependency: small SIMD kernels, no dependencies of its own),
  every allowed row is scored in one int8 dot product against an int8 copy of the query
  (1 ms at 117k rows on one core, the GIL released), each score with a rigorous bound
  on both quantisations' error; every row whose upper bound reaches the k-th best lower
  bound (~250-350 rows for k=100) is rescored with its float32 vector. The result is the
  float32 top k, with the float32 scores: nothing is approximate.
* Without it (numpy alone; ``MINDFILE_NO_SIMSIMD=1`` forces this path), three stages:

  1. sign bits of a fixed random projection (:data:`BITS` bits, 96 bytes a vector),
     compared with the query's by Hamming distance (xor and popcount over all vectors);
  2. the closest :data:`SHORTLIST_FRACTION` of them (at least :data:`SHORTLIST_MIN`) are
     scored with the int8 codes and their bounds;
  3. every candidate whose upper bound reaches the k-th best lower bound is rescored
     with its float32 vector, and those exact scores are ranked as before.

  Stage 3 returns exactly the float32 top-k of the shortlist; stage 1 could in
  principle leave a true neighbour out of the shortlist. Measured on realistic chat text
  at 117k vectors: the float32 top 10 always, 99.8% of the top 100.

Measured at 117k vectors (benchmarks/README.md, "The int8 scan"): 2.7 ms for the top
100 by the three stages, 1.5 ms by the scan. Memory: the float32 matrix stays (1 KB a
vector) and the codes add 364 bytes. The codes are built in a background thread when the
index first grows past the threshold (or after a bulk load); searches use the float32
product until they are ready.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from mindfile._topk import kth_largest, top_positions
from mindfile.embed.base import Vector
from mindfile.storage.backend import AnyDatabase
from mindfile.storage.index_source import index_source
from mindfile.vector import _simd
from mindfile.vector.base import VectorFilter, row_dots

__all__ = [
    "BITS",
    "CODE_ARRAYS",
    "FILTERED_CODES_FROM",
    "QUANTIZE_FROM",
    "SHORTLIST_FRACTION",
    "SHORTLIST_MIN",
    "ExactIndex",
    "search_path",
    "search_rows",
]

_G = TypeVar("_G", bound=np.generic)

#: Vectors from which searches use the quantised stages (below, one float32 product).
QUANTIZE_FROM = 50_000
#: Sign bits per vector in stage 1 (a multiple of 64).
BITS = 768
#: Share of the searched vectors kept by stage 1, and its floor.
SHORTLIST_FRACTION = 0.06
SHORTLIST_MIN = 4_000
#: With codes (the index holds ``QUANTIZE_FROM`` vectors or more), a filtered search
#: uses them from this many allowed rows: gathering 23k float32 rows of a 117k index
#: cost ~3.3 ms, the codes ~1.5 ms (benchmarks/README.md, "Recommendation questions").
FILTERED_CODES_FROM = 10_000
_EDGE = 0.2  # the shortlist's outer fifth (by distance) decides whether it is widened
_GROWTH = 2.0  # ... to this many times its size, once
#: The codes are fitted again (centre re-estimated) when the index has grown this much.
REFIT_GROWTH = 2.0
#: A catch-up that adds more rows than this drops the codes and rebuilds them in the
#: background instead of encoding inline (a bulk load must not stall one search).
_ENCODE_INLINE_MAX = 8_192
_BLOCK = 2_048  # rows per block of stage 2 and of encoding: the float32 block stays in L2
_SEED = 20_261_125  # fixed projection: every process encodes alike
#: float32 rounding of a d-term dot product, in any summation order, is at most about
#: d * 2**-24 of |codes| * |query|; twice that is added to each error bound so that
#: rounding cannot make stage 3 drop a row.
_DOT_ROUNDING = 2 * 2.0**-24
#: ``np.bitwise_count`` (numpy >= 2.0) is stage 1's popcount; without it, float32 only.
_HAS_POPCOUNT = hasattr(np, "bitwise_count")
#: Codes are worth building when some path can search them (the scan or the stages).
_CODES_USABLE = _HAS_POPCOUNT or _simd.ENABLED
#: The arrays that make up a set of codes (``_Codes.arrays``), as published on disk.
#: ``reach`` (each row's ``scale * |codes|``) came later: a generation without it gets
#: it computed when loaded (:meth:`_Codes.from_arrays`).
CODE_ARRAYS = ("mean", "proj", "bits", "int8", "scale", "bound", "reach")
#: Relative float32 rounding of the scan's ``dot * scale * query scale`` (three
#: products), with a margin.
_SCAN_ROUNDING = 8 * 2.0**-24


class ExactIndex:
    """Exact top-k by cosine over in-memory vectors (float32, plus codes when large)."""

    name = "exact"

    def __init__(
        self,
        db: AnyDatabase,
        dims: int,
        *,
        quantize_from: int = QUANTIZE_FROM,
        background: bool = True,
    ) -> None:
        self._db = db
        self._source = index_source(db)
        self._dims = dims
        self._quantize_from = quantize_from
        self._background = background
        self._lock = threading.Lock()
        self._generation = 0  # bumped by every reset: a stale code build is dropped
        self._reset()

    def _reset(self) -> None:
        self._ids = np.zeros(0, dtype=np.int64)
        self._matrix = np.zeros((0, self._dims), dtype=np.float32)
        self._codes = np.zeros(0, dtype=np.int32)
        self._n = 0
        self._session_codes: dict[str, int] = {}
        self._max_id = 0
        self._changes_seen: int | None = None
        self._data_version: tuple[int, int] | None = None
        self._dirty = True
        self._quant: _Codes | None = None
        self._building = False
        self._rewritten: list[int] = []  # positions rewritten while codes are being built
        self._generation += 1

    # -- catching up --------------------------------------------------------------------

    def invalidate(self) -> None:
        self._dirty = True

    def purge(self) -> None:
        """Nothing to do: this index keeps no file outside the store."""

    def stats(self) -> dict[str, object]:
        with self._lock:
            quant = self._quant is not None
            return {
                "persisted": False,
                "vectors": self._n,
                "codes": quant,
                "search": search_path(quant and self._n >= self._quantize_from),
            }

    def rebuild(self) -> None:
        with self._db.lock, self._lock:
            self._reset()
            self._catch_up_locked()

    def _catch_up(self) -> None:
        """Load what changed since the last look. Lock order: database, then index."""
        with self._db.lock, self._lock:
            self._catch_up_locked()

    def _catch_up_locked(self) -> None:
        if self._db.in_write_transaction:
            return  # serve the last committed state: uncommitted rows may roll back
        version = self._db.change_token()
        if not self._dirty and version == self._data_version:
            return
        seen, changed = self._source.vector_changes_since(self._changes_seen)
        if changed is None:  # the change log was pruned past what we saw: reload all
            self._reset()
        before = self._max_id
        # A full load reads every vector the fastest way the store has.
        batch = self._source.all_vectors(self._dims) if before == 0 else None
        if batch is None:
            batch = self._source.vectors_after(before, self._dims)
        if len(batch.ids):
            self._append(batch.ids, batch.matrix, self._codes_for(batch.sessions))
        # Ids above ``before`` were just read, after the log was: already current.
        changed = [r for r in changed or () if r <= before]
        if changed:
            self._reload(changed)
        self._changes_seen = seen
        self._data_version = version
        self._dirty = False
        self._maybe_build_codes()

    def _codes_for(self, sessions: list[str]) -> npt.NDArray[np.int32]:
        return np.fromiter(
            (self._session_codes.setdefault(s, len(self._session_codes)) for s in sessions),
            dtype=np.int32,
            count=len(sessions),
        )

    def _reload(self, rowids: list[int]) -> None:
        """Re-read logged ids: replace held vectors, add missing ones, drop deleted ones."""
        batch = self._source.vectors_by_ids(rowids, self._dims)
        held = self._ids[: self._n]
        hits = np.flatnonzero(np.isin(held, np.asarray(rowids, dtype=np.int64)))
        positions = {int(held[i]): int(i) for i in hits}
        codes = self._codes_for(batch.sessions)
        fresh: list[int] = []
        replaced: list[int] = []
        for j, rowid in enumerate(batch.ids.tolist()):
            at = positions.pop(int(rowid), None)
            if at is None:
                fresh.append(j)
            else:
                self._matrix[at] = batch.matrix[j]
                self._codes[at] = codes[j]
                replaced.append(at)
        if replaced:
            if self._quant is not None:
                self._quant.encode_at(np.asarray(replaced), self._matrix[replaced])
            if self._building:
                self._rewritten.extend(replaced)
        if fresh:
            self._append(batch.ids[fresh], batch.matrix[fresh], codes[fresh])
        if positions:  # logged ids whose vector is gone
            keep = np.ones(self._n, dtype=np.bool_)
            keep[list(positions.values())] = False
            self._compact(keep)

    def _append(
        self,
        ids: npt.NDArray[np.int64],
        matrix: npt.NDArray[np.float32],
        codes: npt.NDArray[np.int32],
    ) -> None:
        need = self._n + len(ids)
        if self._n == 0 and need > len(self._ids):  # a first load: adopt, don't copy
            self._ids = np.array(ids, dtype=np.int64)
            self._codes = np.array(codes, dtype=np.int32)
            self._matrix = np.require(matrix, np.float32, ["C", "W"])
        else:
            if need > len(self._ids):
                cap = max(need, 2 * len(self._ids), 1024)
                self._ids = _grow(self._ids, cap)
                self._codes = _grow(self._codes, cap)
                grown = np.zeros((cap, self._dims), dtype=np.float32)
                grown[: self._n] = self._matrix[: self._n]
                self._matrix = grown
            self._ids[self._n : need] = ids
            self._codes[self._n : need] = codes
            self._matrix[self._n : need] = matrix
        if self._quant is not None:
            if len(ids) > _ENCODE_INLINE_MAX:
                self._quant = None  # rebuilt in the background; float32 meanwhile
            else:
                self._quant.encode_range(self._n, matrix, len(self._ids))
        self._n = need
        self._max_id = max(self._max_id, int(ids.max()))

    def _compact(self, keep: npt.NDArray[np.bool_]) -> None:
        n = int(keep.sum())
        self._ids = self._ids[: self._n][keep].copy()
        self._codes = self._codes[: self._n][keep].copy()
        self._matrix = self._matrix[: self._n][keep].copy()
        if self._quant is not None:
            self._quant.compact(keep)
        if self._building:  # positions moved: the build in flight is dropped
            self._generation += 1
            self._building = False
        self._n = n
        # The highest id may be gone: lower the mark so a re-inserted vector is fetched.
        self._max_id = int(self._ids.max()) if n else 0

    # -- the codes ----------------------------------------------------------------------

    def _maybe_build_codes(self) -> None:
        """Start building codes when the index is large enough and has none (or has
        grown ``REFIT_GROWTH`` times since they were fitted)."""
        if self._building or self._n < self._quantize_from or not _CODES_USABLE:
            return
        if self._quant is not None and self._n < REFIT_GROWTH * self._quant.fitted_on:
            return
        self._building = True
        self._rewritten = []
        args = (self._generation, self._matrix, self._n)
        if self._background:
            threading.Thread(
                target=self._build_codes, args=args, name="mindfile-exact-codes", daemon=True
            ).start()
        else:
            self._build_codes(*args, locked=True)

    def _build_codes(
        self, generation: int, matrix: npt.NDArray[np.float32], n: int, locked: bool = False
    ) -> None:
        """Fit and encode ``matrix[:n]`` (without the lock), then install the codes and
        encode what arrived or changed meanwhile (with it)."""
        try:
            quant = _Codes.fit(matrix[:n], len(matrix), lambda: generation != self._generation)
        except BaseException:
            if not locked:
                with self._lock:
                    if generation == self._generation:
                        self._building = False
            raise
        if quant is None:
            return  # reset or closed meanwhile
        if locked:
            self._install(generation, quant, n)
        else:
            with self._lock:
                self._install(generation, quant, n)

    def _install(self, generation: int, quant: _Codes, n: int) -> None:
        if generation != self._generation:
            return  # reset or compacted since: the next catch-up starts over
        self._building = False
        if self._n - n > _ENCODE_INLINE_MAX:  # a bulk load arrived meanwhile: start over
            self._maybe_build_codes()
            return
        quant.reserve(len(self._ids))
        if self._n > n:
            quant.encode_range(n, self._matrix[n : self._n], len(self._ids))
        if self._rewritten:
            at = np.unique(np.asarray(self._rewritten, dtype=np.intp))
            at = at[at < n]
            quant.encode_at(at, self._matrix[at])
            self._rewritten = []
        self._quant = quant

    # -- searching ----------------------------------------------------------------------

    def size(self) -> int:
        self._catch_up()
        with self._lock:
            return self._n

    def search(
        self, query: Vector, k: int, *, where: VectorFilter | None = None
    ) -> list[tuple[int, float]]:
        self._catch_up()
        with self._lock:  # the product runs without the database's lock
            n = self._n
            if n == 0 or k <= 0:
                return []
            q = np.asarray(query, dtype=np.float32)
            mask = self._mask(where)
            return search_rows(
                self._matrix, self._ids, n, self._quant, q, k, mask, self._quantize_from
            )

    def _mask(self, where: VectorFilter | None) -> npt.NDArray[np.bool_] | None:
        if where is None:
            return None
        mask: npt.NDArray[np.bool_] | None = None
        if where.session_ids is not None:
            codes = [self._session_codes[s] for s in where.session_ids if s in self._session_codes]
            mask = np.isin(self._codes[: self._n], np.array(codes, dtype=np.int32))
        if where.rowids is not None:
            allowed = np.isin(self._ids[: self._n], where.rowids)
            mask = allowed if mask is None else mask & allowed
        return mask

    def close(self) -> None:
        with self._lock:
            self._reset()


class _Codes:
    """Codes of the centred vectors, row ``i`` for the index's row ``i``: sign bits of a
    random projection (stage 1), int8 with a per-vector scale (the scan, stage 2), each
    vector's bound on ``|(x - mean) . q - scale * (codes . q)| / |q|``, and its reach,
    ``scale * |codes|`` (the scan's bound for quantising the query too)."""

    def __init__(
        self,
        mean: npt.NDArray[np.float32],
        fitted_on: int,
        cap: int,
        proj: npt.NDArray[np.float32] | None = None,
        *,
        bits: bool = True,
    ) -> None:
        """``bits=False``: no sign bits (stage 1 of the numpy stages; the int8 scan does
        not read them), so encoding needs no ``rows @ proj`` product. That product is
        BLAS's, whose worker threads then spin on the machine's other core: the ingesting
        process's delta encoding its rows with them cost ~6 s of CPU over a 60k-chunk
        ingest, ~1 s without."""
        dims = len(mean)
        self.mean = mean
        self.fitted_on = fitted_on
        if proj is None:
            proj = np.random.default_rng(_SEED).standard_normal((dims, BITS)).astype(np.float32)
        self.proj = proj
        # Word-major: one xor a word. No words without the sign bits.
        self.bits = np.zeros((BITS // 64 if bits else 0, cap), dtype=np.uint64)
        self.int8 = np.zeros((cap, dims), dtype=np.int8)
        self.scale = np.zeros(cap, dtype=np.float32)
        self.bound = np.zeros(cap, dtype=np.float32)
        self.reach = np.zeros(cap, dtype=np.float32)
        # Scratch for one search at a time (searches hold the index's lock).
        self._scratch: dict[str, npt.NDArray[np.generic]] = {}

    @classmethod
    def from_arrays(cls, arrays: dict[str, npt.NDArray[np.generic]], fitted_on: int) -> _Codes:
        """Codes over given arrays (:data:`CODE_ARRAYS`; e.g. memory-mapped from a
        published generation, read-only: only :meth:`search` may be used on them)."""
        codes = cls.__new__(cls)
        codes.mean = arrays["mean"]  # type: ignore[assignment]
        codes.proj = arrays["proj"]  # type: ignore[assignment]
        codes.fitted_on = fitted_on
        codes.bits = arrays["bits"]  # type: ignore[assignment]
        codes.int8 = arrays["int8"]  # type: ignore[assignment]
        codes.scale = arrays["scale"]  # type: ignore[assignment]
        codes.bound = arrays["bound"]  # type: ignore[assignment]
        reach = arrays.get("reach")
        codes.reach = _reach(codes.int8, codes.scale) if reach is None else reach  # type: ignore[assignment]
        codes._scratch = {}
        return codes

    def arrays(self, n: int) -> dict[str, npt.NDArray[np.generic]]:
        """The first ``n`` rows' codes and the shared parts, by :data:`CODE_ARRAYS` name."""
        return {
            "mean": self.mean,
            "proj": self.proj,
            "bits": self.bits[:, :n],
            "int8": self.int8[:n],
            "scale": self.scale[:n],
            "bound": self.bound[:n],
            "reach": self.reach[:n],
        }

    @classmethod
    def fit(
        cls,
        matrix: npt.NDArray[np.float32],
        cap: int,
        cancelled: Callable[[], bool],
        *,
        bits: bool = True,
    ) -> _Codes | None:
        """Codes centred on the mean of ``matrix`` (with sign bits unless ``bits`` is
        False); None if ``cancelled()`` turns true."""
        n = len(matrix)
        mean = np.zeros(matrix.shape[1], dtype=np.float64)
        for start in range(0, n, _BLOCK):
            mean += matrix[start : start + _BLOCK].sum(axis=0, dtype=np.float64)
        quant = cls((mean / max(n, 1)).astype(np.float32), n, cap, bits=bits)
        for start in range(0, n, 16 * _BLOCK):
            if cancelled():
                return None
            quant.encode_range(start, matrix[start : start + 16 * _BLOCK], cap)
        return quant

    @property
    def has_bits(self) -> bool:
        """Whether the sign bits are kept (the numpy stages need them)."""
        return len(self.bits) > 0

    def reserve(self, cap: int) -> None:
        if cap > self.bits.shape[1]:
            bits = np.zeros((self.bits.shape[0], cap), dtype=np.uint64)
            bits[:, : self.bits.shape[1]] = self.bits
            self.bits = bits
            int8 = np.zeros((cap, self.int8.shape[1]), dtype=np.int8)
            int8[: len(self.int8)] = self.int8
            self.int8 = int8
            self.scale = _grow(self.scale, cap)
            self.bound = _grow(self.bound, cap)
            self.reach = _grow(self.reach, cap)
            self._scratch.clear()

    def encode_range(self, start: int, rows: npt.NDArray[np.float32], cap: int) -> None:
        """Encode ``rows`` as index rows ``start, start + 1, ...`` (growing to ``cap``)."""
        self.reserve(cap)
        for lo in range(0, len(rows), _BLOCK):
            block = rows[lo : lo + _BLOCK]
            self._encode(np.arange(start + lo, start + lo + len(block)), block)

    def encode_at(self, at: npt.NDArray[np.intp], rows: npt.NDArray[np.float32]) -> None:
        if len(at):
            self._encode(at, rows)

    def _encode(self, at: npt.NDArray[np.intp], rows: npt.NDArray[np.float32]) -> None:
        centred = rows - self.mean
        if self.has_bits:
            signs = np.packbits(centred @ self.proj > 0, axis=1)
            self.bits[:, at] = signs.view(np.uint64).T
        peak = np.abs(centred).max(axis=1)
        scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
        codes = np.rint(centred / scale[:, None])
        np.clip(codes, -127, 127, out=codes)
        self.int8[at] = codes
        centred -= codes * scale[:, None]  # the quantisation error
        err = np.sqrt(np.einsum("ij,ij->i", centred, centred))
        reach = scale * np.sqrt(np.einsum("ij,ij->i", codes, codes))
        rounding = len(self.mean) * _DOT_ROUNDING * reach
        self.scale[at] = scale
        self.reach[at] = reach * (1 + 1e-5)  # rounded up, as the bound
        # Rounded up a little so float32 arithmetic in the bound itself cannot undercut.
        self.bound[at] = (err + rounding) * (1 + 1e-5) + 1e-7

    def compact(self, keep: npt.NDArray[np.bool_]) -> None:
        n = len(keep)
        self.bits = self.bits[:, :n][:, keep].copy()
        self.int8 = self.int8[:n][keep].copy()
        self.scale = self.scale[:n][keep].copy()
        self.bound = self.bound[:n][keep].copy()
        self.reach = self.reach[:n][keep].copy()
        self._scratch.clear()

    def subset(self, keep: npt.NDArray[np.bool_], cap: int) -> _Codes:
        """New codes holding the rows ``keep`` marks (in order), with room for ``cap``."""
        out = _Codes(self.mean, self.fitted_on, 0, self.proj)
        out.bits, out.int8 = self.bits, self.int8
        out.scale, out.bound, out.reach = self.scale, self.bound, self.reach
        out.compact(keep)
        out.reserve(cap)
        return out

    def _buffer(self, name: str, shape: tuple[int, ...], dtype: type[_G]) -> npt.NDArray[_G]:
        buf = self._scratch.get(name)
        if buf is None or buf.shape[0] < shape[0] or buf.dtype != dtype:
            buf = np.empty(shape, dtype=dtype)
            self._scratch[name] = buf
        return buf[: shape[0]]  # type: ignore[return-value]

    def scan(
        self,
        q: npt.NDArray[np.float32],
        k: int,
        n: int,
        idx: npt.NDArray[np.intp] | None,
        mask: npt.NDArray[np.bool_] | None,
    ) -> npt.NDArray[np.intp] | None:
        """Rows that can hold the top ``k`` by ``q`` (a superset of the float32 top
        ``k``: rescore and rank them), by scoring every allowed row with its int8 codes.

        ``idx``: the allowed rows, gathered first (a filter that leaves few); else all
        of the first ``n`` rows, minus those ``mask`` excludes. The query is quantised
        to int8 too, so each score ``s * (codes . qi)`` (``s`` the row's scale times the
        query's) is within ``bound * |q| + reach * |q - qs * qi|`` (plus rounding) of the
        centred dot product. None when the query is zero (nothing to rank by).
        """
        peak = float(np.abs(q).max(initial=0.0))
        if not peak > 0 or not math.isfinite(peak):
            return None
        q_scale = peak / 127.0
        qi = np.rint(q / np.float32(q_scale)).astype(np.int8)
        resid = float(np.linalg.norm(q.astype(np.float64) - qi.astype(np.float64) * q_scale))
        qnorm = float(np.linalg.norm(q.astype(np.float64)))
        # |approx| <= reach * q_scale * |qi|: the rounding term rides on the reach.
        qi_norm = q_scale * float(np.linalg.norm(qi.astype(np.float64)))
        per_bound = np.float32(qnorm * (1 + 1e-6))
        per_reach = np.float32((resid + _SCAN_ROUNDING * qi_norm) * (1 + 1e-6))
        if idx is None:
            m = n
            codes, scale = self.int8[:n], self.scale[:n]
            bound, reach = self.bound[:n], self.reach[:n]
        else:
            m = len(idx)
            codes = np.take(
                self.int8, idx, axis=0, out=self._buffer("gather", (m, len(q)), np.int8)
            )
            scale, bound, reach = self.scale[idx], self.bound[idx], self.reach[idx]
        approx = _simd.int8_dots(qi, codes)
        slack = self._buffer("slack", (m,), np.float32)
        np.multiply(bound, per_bound, out=slack)
        work = self._buffer("work", (m,), np.float32)
        np.multiply(reach, per_reach, out=work)
        slack += work
        np.multiply(scale, np.float32(q_scale), out=work)
        approx *= work
        np.subtract(approx, slack, out=work)  # lower bounds
        allowed = None if mask is None else mask[:m]
        # The k-th best lower bound among the allowed rows only: partitioning the whole
        # array with the others at -inf made numpy's introselect crawl (1.7 ms at 117k).
        lower = work if allowed is None else work[allowed]
        if len(lower) <= k:
            rows = np.arange(m) if allowed is None else np.flatnonzero(allowed)
        else:
            kth = kth_largest(lower, k)
            approx += slack  # upper bounds
            rows = np.flatnonzero(approx >= kth)
            if allowed is not None:
                rows = rows[allowed[rows]]
        return rows if idx is None else idx[rows]

    def search(
        self,
        q: npt.NDArray[np.float32],
        k: int,
        n: int,
        mask: npt.NDArray[np.bool_] | None,
        shortlist: int,
    ) -> npt.NDArray[np.intp]:
        """Rows that can hold the top ``k`` by ``q``, among the rows ``mask`` allows (a
        superset of the float32 top ``k`` of the shortlist: rescore and rank them).

        Stage 1 keeps the ``shortlist`` rows nearest in Hamming distance (whole distance
        buckets, so a few more); stage 2 scores them with int8 codes. If a row of the
        shortlist's outer fifth (by distance) can still reach the top ``k``, the boundary
        is live and the shortlist doubles once (the rows added are scored too).
        """
        dist = self._distances(q, n, mask)
        cumulative = np.cumsum(np.bincount(dist, minlength=BITS + 2))
        cut = min(int(np.searchsorted(cumulative, shortlist)), BITS)
        cand = np.flatnonzero(dist <= cut)
        approx, slack = self._approx(q, cand)
        if len(cand) <= k:
            return cand
        kth = kth_largest(approx - slack, k)
        if cut < BITS:
            inner = int(np.searchsorted(cumulative, (1 - _EDGE) * shortlist))
            edge = dist[cand] > inner
            if np.any(approx[edge] + slack[edge] >= kth):
                wider = min(int(np.searchsorted(cumulative, _GROWTH * shortlist)), BITS)
                more = np.flatnonzero((dist > cut) & (dist <= wider))
                more_approx, more_slack = self._approx(q, more)
                cand = np.concatenate([cand, more])
                approx = np.concatenate([approx, more_approx])
                slack = np.concatenate([slack, more_slack])
                kth = kth_largest(approx - slack, k)
        keep: npt.NDArray[np.intp] = cand[approx + slack >= kth]
        return keep

    def _distances(
        self, q: npt.NDArray[np.float32], n: int, mask: npt.NDArray[np.bool_] | None
    ) -> npt.NDArray[np.uint16]:
        """Stage 1: Hamming distance of every row's sign code to the query's (rows that
        ``mask`` excludes get ``BITS + 1``, past any real distance)."""
        qbits = np.packbits((q - self.mean) @ self.proj > 0).view(np.uint64)
        dist = self._buffer("dist", (n,), np.uint16)
        word = self._buffer("word", (n,), np.uint64)
        count = self._buffer("count", (n,), np.uint8)
        for w, qword in enumerate(qbits):
            np.bitwise_xor(self.bits[w, :n], qword, out=word)
            if w == 0:
                np.bitwise_count(word, out=count)
                dist[:] = count
            else:
                np.add(dist, np.bitwise_count(word, out=count), out=dist)
        if mask is not None:
            dist[~mask] = BITS + 1
        return dist

    def _approx(
        self, q: npt.NDArray[np.float32], rows: npt.NDArray[np.intp]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """Stage 2: ``(x - mean) . q`` of ``rows`` from their int8 codes, and each one's
        error bound (the true value is within ``approx +- slack``)."""
        m = len(rows)
        approx = np.empty(m, dtype=np.float32)
        small = self._buffer("int8", (_BLOCK, len(q)), np.int8)
        wide = self._buffer("float", (_BLOCK, len(q)), np.float32)
        for lo in range(0, m, _BLOCK):
            block = rows[lo : lo + _BLOCK]
            b = len(block)
            np.take(self.int8, block, axis=0, out=small[:b])
            np.copyto(wide[:b], small[:b], casting="unsafe")
            np.vecdot(wide[:b], q, out=approx[lo : lo + b])  # see _dot
        approx *= self.scale[rows]
        slack = self.bound[rows] * np.float32(np.linalg.norm(q) * (1 + 1e-6))
        return approx, slack


def search_path(coded: bool) -> str:
    """How an unfiltered search runs (shown by ``info()``): ``"float32"`` (no codes: a
    small index, or codes still being built), ``"int8 scan (simsimd)"`` or, without
    simsimd, ``"numpy stages"``."""
    if not coded:
        return "float32"
    if _simd.ENABLED:
        return "int8 scan (simsimd)"
    return "numpy stages" if _HAS_POPCOUNT else "float32"


def search_rows(
    matrix: npt.NDArray[np.float32],
    ids: npt.NDArray[np.int64],
    n: int,
    quant: _Codes | None,
    q: npt.NDArray[np.float32],
    k: int,
    mask: npt.NDArray[np.bool_] | None,
    quantize_from: int,
) -> list[tuple[int, float]]:
    """The top ``k`` ``(id, score)`` by ``q`` among the first ``n`` rows (those ``mask``
    allows), through the codes when there are enough rows, else one float32 product.
    ``quant`` is used by one search at a time (its scratch buffers)."""
    idx = None if mask is None else np.flatnonzero(mask)
    if idx is not None and len(idx) == 0:
        return []
    searched = n if idx is None else len(idx)
    shortlist = max(SHORTLIST_MIN, math.ceil(SHORTLIST_FRACTION * searched))
    rows: npt.NDArray[np.intp] | None
    # A filter leaving fewer rows than ``quantize_from`` still goes through the codes
    # when they exist and it leaves enough rows for a float32 gather to cost more
    # (FILTERED_CODES_FROM): e.g. the preference leg's ~20% of the store.
    codes_from = min(quantize_from, FILTERED_CODES_FROM)
    coded = quant is not None and searched >= codes_from
    rows = None
    if coded and _simd.ENABLED and 4 * k <= searched:
        assert quant is not None
        # Gathering the allowed rows' codes costs more than scanning them all from
        # ~25-30% of the rows (117k: 20% 1.0 vs 1.7 ms, 35% 2.5 vs 1.7 ms).
        gather = idx is not None and 4 * len(idx) < n  # else one pass, masked
        rows = quant.scan(q, k, n, idx if gather else None, None if gather else mask)
    elif quant is not None and coded and quant.has_bits and _HAS_POPCOUNT and 4 * k <= shortlist:
        rows = quant.search(q, k, n, mask, shortlist)
    if rows is not None:
        scores = row_dots(matrix[rows], q)
    elif idx is None:
        rows, scores = None, row_dots(matrix[:n], q)
    elif 2 * len(idx) >= n:
        # Most rows pass the filter (e.g. every chunk is a synced file's): one pass over
        # the contiguous matrix, not a gathered copy of it (43k rows: 9.5 -> ~2 ms).
        rows, scores = idx, row_dots(matrix[:n], q)[idx]
    else:
        rows, scores = idx, row_dots(matrix[idx], q)
    held = ids[:n] if rows is None else ids[rows]
    top = _top_k(scores, held, k)
    return list(zip(held[top].tolist(), scores[top].tolist(), strict=True))


def _reach(int8: npt.NDArray[np.int8], scale: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Each row's ``scale * |codes|`` (rounded up as :meth:`_Codes._encode` does), for
    codes published before they carried it."""
    out = np.empty(len(int8), dtype=np.float32)
    for lo in range(0, len(int8), _BLOCK):
        block = np.asarray(int8[lo : lo + _BLOCK], dtype=np.float32)
        out[lo : lo + len(block)] = np.sqrt(np.einsum("ij,ij->i", block, block))
    out *= np.asarray(scale, dtype=np.float32)
    out *= np.float32(1 + 1e-5)
    return out


def _grow(arr: npt.NDArray[_G], cap: int) -> npt.NDArray[_G]:
    out = np.zeros(cap, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


def _top_k(
    scores: npt.NDArray[np.float32], ids: npt.NDArray[np.int64], k: int
) -> npt.NDArray[np.intp]:
    """Positions of the ``k`` best scores, best first; ties go to the higher id.

    Every score tied with the k-th is considered before truncating, so the top ``k`` is
    the same set whatever ``k`` (a prefix of the top ``k + 1``).
    """
    part = top_positions(scores, k)
    order = np.lexsort((-ids[part], -scores[part]))[:k]
    return part[order]
