"""``vector_index="exact"`` on a store file: the exact index's arrays published on disk.

The in-heap :class:`~mindfile.vector.exact.ExactIndex` reads every vector out of SQLite
when a process opens the store (~0.45 s and ~160 MB of private memory at 117k vectors)
and fits its codes again (~0.8 s in the background). Here the same arrays are a
*generation* in ``<store file>.index/exact/<generation>/``, written once and
memory-mapped by every process, so a new process searches at once and N processes
share one copy in the page cache. Base, delta, merges, manifests and crash safety are
those of the on-disk ANN indexes (:mod:`mindfile.vector.ann`, docs/vector-indexes.md);
only the base differs: it is exact, so it answers with scores and nothing is rescored
from SQLite.

A generation holds, rows in ascending chunk id order:

* ``ids.npy`` (int64), ``keys.npy`` (int64 session keys, :func:`session_key`),
  ``vectors.npy`` (float32, one row a vector);
* from :data:`~mindfile.vector.exact.QUANTIZE_FROM` vectors, the codes of
  :class:`~mindfile.vector.exact.ExactIndex` (``mean``, ``proj``, ``bits``, ``int8``,
  ``scale``, ``bound``), searched by the same three stages with the same results;
* ``meta.json``: the row count and how many rows the codes' centre was fitted on.

A merge writes a new generation: the base's rows minus the deleted and rewritten ones,
plus the delta's, streamed into memory-mapped output files (no second copy in the
heap). Codes of kept rows are copied, new rows are encoded with the same centre; the
centre is fitted again when the base has doubled since.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mindfile.storage.db import Database
from mindfile.vector.ann import AnnBackend, AnnIndex, BaseReader
from mindfile.vector.ann_disk import Manifest, RowBatch, fsync_dir, load_array
from mindfile.vector.exact import (
    _CODES_USABLE,
    BITS,
    CODE_ARRAYS,
    QUANTIZE_FROM,
    REFIT_GROWTH,
    _Codes,
    search_path,
    search_rows,
)

__all__ = ["ExactDiskBackend", "ExactDiskIndex"]

#: Rows copied per step when a merge streams a generation to disk.
_COPY = 16_384
#: Up to this many sessions a filter compares keys directly (``np.isin``); more (a
#: user's sessions) go through the rows' session ordinals.
_FEW_SESSIONS = 16
_META = "meta.json"


class _Rows:
    """A generation's rows (mapped or in memory) and its codes, if any."""

    def __init__(
        self,
        ids: npt.NDArray[np.int64],
        keys: npt.NDArray[np.int64],
        vectors: npt.NDArray[np.float32],
        codes: _Codes | None,
    ) -> None:
        self.ids, self.keys, self.vectors, self.codes = ids, keys, vectors, codes

    @classmethod
    def load(cls, where: Path, count: int, dims: int) -> _Rows:
        """Map a generation; raises when it is missing or its parts disagree."""
        meta = json.loads((where / _META).read_text(encoding="utf-8"))
        mapped = count > 0  # an empty array cannot be mapped
        ids = load_array(where / "ids.npy", mapped=mapped)
        keys = load_array(where / "keys.npy", mapped=mapped)
        vectors = load_array(where / "vectors.npy", mapped=mapped)
        if not (len(ids) == len(keys) == len(vectors) == count == int(meta["count"])):
            raise ValueError(f"{where.name}: row counts disagree with the manifest ({count})")
        if vectors.ndim != 2 or vectors.shape[1] != dims or vectors.dtype != np.float32:
            raise ValueError(f"{where.name}: vectors are not {dims}-dimensional float32")
        codes = None
        if meta.get("fitted_on"):
            arrays = {
                name: load_array(where / f"{name}.npy")
                for name in CODE_ARRAYS
                if name != "reach" or (where / "reach.npy").exists()  # older generations
            }
            if arrays["bits"].shape != (BITS // 64, count) or len(arrays["int8"]) != count:
                raise ValueError(f"{where.name}: codes disagree with the vectors")
            codes = _Codes.from_arrays(arrays, int(meta["fitted_on"]))
        return cls(ids, keys, vectors, codes)


class _ExactReader(BaseReader):
    """A mapped generation, searched exactly (scores included)."""

    scored = True

    def __init__(self, manifest: Manifest, rows: _Rows, quantize_from: int) -> None:
        super().__init__(manifest)
        self._rows = rows
        self._quantize_from = quantize_from
        self._search_lock = threading.Lock()  # the codes' scratch buffers: one search
        # The last read-only rowids filter and its mask (replaced whole): a preference
        # leg passes the same array of statements at every recommendation question,
        # and locating its 24k rowids in a 117k generation cost ~0.45 ms each time.
        self._allowed_for: tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]] | None = None
        # Each row's session as a small ordinal, and the distinct session keys (sorted),
        # made the first time a search names many sessions (a user's): ``np.isin`` over
        # the rows' 64-bit keys sorted them at every search (~2.5 ms at 117k rows and
        # 1,000 sessions); a lookup table indexed by ordinal costs ~0.2 ms.
        self._sessions: tuple[_Rows, npt.NDArray[np.int64], npt.NDArray[np.int32]] | None = None

    def scored_candidates(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        *,
        session_keys: Sequence[int] | None,
        rowids: Sequence[int] | npt.NDArray[np.int64] | None,
        exclude: Sequence[int],
    ) -> list[tuple[int, float]]:
        rows = self._rows
        n = len(rows.ids)
        mask: npt.NDArray[np.bool_] | None = None
        if session_keys is not None:
            mask = self._in_sessions(rows, np.asarray(session_keys, dtype=np.int64))
        if rowids is not None:
            allowed = self._allowed(rowids, n)
            mask = allowed.copy() if mask is None else mask & allowed
        if exclude:
            if mask is None:
                mask = np.ones(n, dtype=np.bool_)
            mask[self._positions(exclude)] = False
        with self._search_lock:
            return search_rows(
                rows.vectors, rows.ids, n, rows.codes, query, k, mask, self._quantize_from
            )

    def candidates(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        *,
        session_keys: Sequence[int] | None,
        rowids: npt.NDArray[np.int64] | None,
        exclude: Sequence[int],
    ) -> list[int]:
        hits = self.scored_candidates(
            query, k, session_keys=session_keys, rowids=rowids, exclude=exclude
        )
        return [i for i, _ in hits]

    def _in_sessions(self, rows: _Rows, wanted: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Which of ``rows`` belong to the sessions of ``wanted`` (session keys)."""
        if len(wanted) <= _FEW_SESSIONS:  # numpy compares each key: already fast
            mask: npt.NDArray[np.bool_] = np.isin(rows.keys, wanted)
            return mask
        table = self._sessions
        if table is None or table[0] is not rows:
            keys, inverse = np.unique(rows.keys, return_inverse=True)
            table = (rows, keys, inverse.astype(np.int32))
            self._sessions = table
        _, distinct, ordinal = table
        lut = np.zeros(len(distinct), dtype=np.bool_)
        if len(distinct):
            at = np.minimum(np.searchsorted(distinct, wanted), len(distinct) - 1)
            lut[at[distinct[at] == wanted]] = True
        found: npt.NDArray[np.bool_] = lut[ordinal]
        return found

    def _allowed(
        self, rowids: Sequence[int] | npt.NDArray[np.int64], n: int
    ) -> npt.NDArray[np.bool_]:
        """The rows ``rowids`` allow (do not modify it: it may be the cached one). Kept
        for the next call when ``rowids`` is a read-only array (it cannot change)."""
        cached = self._allowed_for
        if cached is not None and cached[0] is rowids:
            return cached[1]
        allowed = np.zeros(n, dtype=np.bool_)
        allowed[self._positions(rowids)] = True
        if isinstance(rowids, np.ndarray) and not rowids.flags.writeable:
            self._allowed_for = (rowids, allowed)
        return allowed

    def _positions(self, rowids: Sequence[int] | npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
        """Rows holding these chunk ids (ids absent from the generation are skipped)."""
        ids = self._rows.ids
        want = np.asarray(rowids, dtype=np.int64)
        at = np.searchsorted(ids, want)
        at = np.minimum(at, max(len(ids) - 1, 0))
        if not len(ids):
            return np.zeros(0, dtype=np.intp)
        found: npt.NDArray[np.intp] = at[ids[at] == want]
        return found

    def count_present(self, rowids: Sequence[int]) -> int:
        return len(np.unique(self._positions(rowids)))

    def _close(self) -> None:
        self._rows = _Rows(
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros((0, self._rows.vectors.shape[1]), np.float32),
            None,
        )


class ExactDiskBackend(AnnBackend):
    """Build, merge, open and collect generations of the exact index's arrays."""

    name = "exact"

    def __init__(self, dims: int, quantize_from: int = QUANTIZE_FROM) -> None:
        self._dims = dims
        self._quantize_from = quantize_from

    def build(self, folder: Path, generation: str, batches: Iterator[RowBatch]) -> tuple[str, int]:
        empty = _Rows(
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros((0, self._dims), np.float32),
            None,
        )
        return self._write(folder, generation, empty, np.zeros(0, np.intp), batches)

    def merge(
        self,
        folder: Path,
        base: Manifest,
        generation: str,
        deletes: Sequence[int],
        batches: Iterator[RowBatch],
    ) -> tuple[str, int]:
        old = _Rows.load(folder / base.generation, base.count, self._dims)
        listed = list(batches)  # their ids leave the old rows too
        upserted = [b.ids for b in listed]
        gone = np.unique(np.concatenate([np.asarray(deletes, dtype=np.int64), *upserted]))
        keep = np.flatnonzero(~np.isin(old.ids, gone, assume_unique=False))
        return self._write(folder, generation, old, keep, iter(listed))

    def _write(
        self,
        folder: Path,
        generation: str,
        old: _Rows,
        keep: npt.NDArray[np.intp],
        batches: Iterator[RowBatch],
    ) -> tuple[str, int]:
        """Write ``old``'s rows at ``keep`` plus ``batches``, ascending by id."""
        listed = list(batches)
        new_ids = _cat([b.ids for b in listed], np.int64, (0,))
        new_keys = _cat([b.session_keys for b in listed], np.int64, (0,))
        new_vectors = _cat([b.matrix for b in listed], np.float32, (0, self._dims))
        if len(new_ids):  # a rewritten row read twice (changed, then after): keep the last
            _, last = np.unique(new_ids[::-1], return_index=True)
            pick = np.sort(len(new_ids) - 1 - last)
            new_ids, new_keys, new_vectors = new_ids[pick], new_keys[pick], new_vectors[pick]
        kept = len(keep)
        n = kept + len(new_ids)
        all_ids = np.concatenate([old.ids[keep], new_ids])
        order = np.argsort(all_ids, kind="stable")
        where = folder / generation
        tmp = folder / f".{generation}.tmp"
        tmp.mkdir(parents=True)
        try:
            if n == 0:  # nothing left: empty arrays (a zero-length file cannot be mapped)
                for name, dtype, shape in _EMPTY(self._dims):
                    np.save(tmp / f"{name}.npy", np.zeros(shape, dtype=dtype))
                (tmp / _META).write_text(json.dumps({"count": 0, "fitted_on": 0}), "utf-8")
                os.replace(tmp, where)
                fsync_dir(folder)
                return generation, 0
            out = {
                "ids": _open_out(tmp / "ids.npy", np.int64, (n,)),
                "keys": _open_out(tmp / "keys.npy", np.int64, (n,)),
                "vectors": _open_out(tmp / "vectors.npy", np.float32, (n, self._dims)),
            }
            sources: dict[str, tuple[npt.NDArray[Any], npt.NDArray[Any]]] = {
                "ids": (old.ids, new_ids),
                "keys": (old.keys, new_keys),
                "vectors": (old.vectors, new_vectors),
            }
            for lo in range(0, n, _COPY):
                pos = order[lo : lo + _COPY]
                from_old = pos < kept
                for name, (before, fresh) in sources.items():
                    block = out[name][lo : lo + len(pos)]
                    block[from_old] = before[keep[pos[from_old]]]
                    block[~from_old] = fresh[pos[~from_old] - kept]
            fitted_on = self._write_codes(tmp, old, keep, order, out["vectors"], n)
            for array in out.values():
                array.flush()
            del out
            meta = {"count": n, "fitted_on": fitted_on}
            (tmp / _META).write_text(json.dumps(meta), encoding="utf-8")
            for child in tmp.iterdir():
                _fsync(child)
            os.replace(tmp, where)
            fsync_dir(folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return generation, n

    def _write_codes(
        self,
        tmp: Path,
        old: _Rows,
        keep: npt.NDArray[np.intp],
        order: npt.NDArray[np.intp],
        vectors: npt.NDArray[np.float32],
        n: int,
    ) -> int:
        """The new generation's codes (0: none, below the threshold). Rows kept from a
        base whose centre still fits (not yet doubled) keep their codes; the others are
        encoded. Returns the row count the centre was fitted on."""
        if n < self._quantize_from or not _CODES_USABLE:
            return 0
        prior = old.codes
        if prior is None or n >= REFIT_GROWTH * prior.fitted_on:
            fitted = _Codes.fit(vectors, n, lambda: False)
            assert fitted is not None
            arrays = fitted.arrays(n)
            for name in CODE_ARRAYS:
                np.save(tmp / f"{name}.npy", np.ascontiguousarray(arrays[name]))
            return fitted.fitted_on
        codes = _Codes.from_arrays(
            {
                "mean": np.asarray(prior.mean),
                "proj": np.asarray(prior.proj),
                "bits": _open_out(tmp / "bits.npy", np.uint64, (BITS // 64, n)),
                "int8": _open_out(tmp / "int8.npy", np.int8, (n, self._dims)),
                "scale": _open_out(tmp / "scale.npy", np.float32, (n,)),
                "bound": _open_out(tmp / "bound.npy", np.float32, (n,)),
                "reach": _open_out(tmp / "reach.npy", np.float32, (n,)),
            },
            prior.fitted_on,
        )
        kept = len(keep)
        fresh: list[npt.NDArray[np.intp]] = []
        for lo in range(0, n, _COPY):
            pos = order[lo : lo + _COPY]
            from_old = pos < kept
            at = np.arange(lo, lo + len(pos))
            src = keep[pos[from_old]]
            codes.bits[:, at[from_old]] = prior.bits[:, src]
            codes.int8[at[from_old]] = prior.int8[src]
            codes.scale[at[from_old]] = prior.scale[src]
            codes.bound[at[from_old]] = prior.bound[src]
            codes.reach[at[from_old]] = prior.reach[src]
            fresh.append(at[~from_old])
        rows = np.concatenate(fresh) if fresh else np.zeros(0, np.intp)
        for lo in range(0, len(rows), _COPY):
            at = rows[lo : lo + _COPY]
            codes.encode_at(at, np.asarray(vectors[at]))
        np.save(tmp / "mean.npy", np.asarray(prior.mean))
        np.save(tmp / "proj.npy", np.asarray(prior.proj))
        for name in ("bits", "int8", "scale", "bound", "reach"):
            getattr(codes, name).flush()
        return prior.fitted_on

    def open(self, folder: Path, manifest: Manifest) -> BaseReader:
        where = folder / manifest.generation
        if not where.is_dir():
            raise FileNotFoundError(f"generation {manifest.generation} is missing")
        rows = _Rows.load(where, manifest.count, self._dims)
        return _ExactReader(manifest, rows, self._quantize_from)

    def collect(self, folder: Path, keep: Manifest | None) -> None:
        """Remove every generation but ``keep`` (and unfinished ones). A process that
        still maps a removed one keeps reading it: the kernel frees the pages with the
        last mapping. Called under the build lock, so no build is in flight."""
        for child in folder.iterdir():
            if child.is_dir() and (keep is None or child.name != keep.generation):
                shutil.rmtree(child, ignore_errors=True)


class ExactDiskIndex(AnnIndex):
    """The exact index with its arrays published next to the store (see module doc)."""

    name = "exact"
    #: The delta is searched exactly in float32 and merging rewrites the whole base, so
    #: it may grow to a quarter of the base: a bulk ingest costs ~4 rewrites of the
    #: data, not one every 2%.
    min_delta = 4096
    delta_fraction = 0.25
    #: Bases of at least this many vectors carry codes (tests lower it).
    quantize_from = QUANTIZE_FROM

    def __init__(self, db: Database, dims: int) -> None:
        super().__init__(db, dims, ExactDiskBackend(dims, self.quantize_from))

    def stats(self) -> dict[str, object]:
        """:meth:`AnnIndex.stats`, and how a search of the mapped base runs
        (:func:`~mindfile.vector.exact.search_path`; the delta is float32)."""
        out = super().stats()
        reader = self._reader
        rows = getattr(reader, "_rows", None)
        out["search"] = search_path(rows is not None and rows.codes is not None)
        return out


def _EMPTY(dims: int) -> list[tuple[str, Any, tuple[int, ...]]]:
    return [("ids", np.int64, (0,)), ("keys", np.int64, (0,)), ("vectors", np.float32, (0, dims))]


def _cat(parts: list[npt.NDArray[Any]], dtype: Any, empty: tuple[int, ...]) -> npt.NDArray[Any]:
    if not parts:
        return np.zeros(empty, dtype=dtype)
    return np.ascontiguousarray(np.concatenate(parts), dtype=dtype)


def _open_out(path: Path, dtype: Any, shape: tuple[int, ...]) -> np.memmap[Any, Any]:
    out: np.memmap[Any, Any] = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
    return out


def _fsync(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())
