"""``vector_index="zvec"``: zvec's HNSW (FP16-quantised) on disk, memory-mapped and shared.

A generation is one zvec collection in ``<store file>.index/zvec/gen-<id>/``, opened
read-only (zvec takes a shared lock on its ``LOCK`` file; a writer needs it exclusive,
so a published generation is never written again). A merge copies the current
generation to a new folder, applies the delta there and publishes it. How base, delta
and merges fit together: :mod:`mindfile.vector.ann` and docs/vector-indexes.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from mindfile.errors import ConfigError
from mindfile.storage.db import Database
from mindfile.vector.ann import AnnBackend, AnnIndex, BaseReader
from mindfile.vector.ann_disk import Manifest, RowBatch, filter_expression
from mindfile.vector.base import members

__all__ = ["ZvecIndex"]

#: HNSW construction: links per node and candidate list size.
M = 16
EF_CONSTRUCTION = 200
#: Search candidate list size: about the square root of the vector count, at least
#: ``EF_SEARCH`` and twice ``k`` (zvec allows up to 2,048). At 1M LoCoMo chunks
#: recall@10 was 0.93 with 300 and 0.98 with 1,000 (+0.9 ms; benchmarks/README.md).
EF_SEARCH = 300
MAX_EF = 2048
#: The most values zvec takes in one ``IN`` list of a filter (longer ones raise
#: ValueError: "In rel expr only support list size no more than 20000").
IN_MAX = 20_000
#: A rowid filter allowing at least this share of the base is applied after an
#: unfiltered search over-fetching by its inverse (one query instead of one per
#: ``IN_MAX`` rowids); the filtered queries remain the fallback. Measured at 1M chunks
#: with 202k statements (a preference question's leg): 52 ms a question this way,
#: 330 ms in 11 filtered queries.
WIDE_SHARE = 0.05
#: zvec's largest write batch.
WRITE_BATCH = 1024

_init_lock = threading.Lock()
_initialised = False


def _zvec() -> Any:
    """The zvec module, initialised once per process; ConfigError when missing."""
    global _initialised
    try:
        import zvec
    except ImportError as exc:
        raise ConfigError(
            "vector_index='zvec' needs the zvec package: pip install 'mindfile[zvec]'"
        ) from exc
    with _init_lock:
        if not _initialised:
            # RuntimeError: the application initialised it already.
            with contextlib.suppress(RuntimeError):
                zvec.init(log_level=zvec.LogLevel.WARN)
            _initialised = True
    return zvec


class _ZvecReader(BaseReader):
    def __init__(self, manifest: Manifest, collection: Any) -> None:
        super().__init__(manifest)
        self._coll = collection
        self._zvec = _zvec()
        self._ef = max(EF_SEARCH, round(math.sqrt(manifest.count)))

    def candidates(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        *,
        session_keys: Sequence[int] | None,
        rowids: npt.NDArray[np.int64] | None,
        exclude: Sequence[int],
    ) -> list[int]:
        # Lists longer than zvec takes: a long exclusion is applied afterwards (over-
        # fetching by its length); long allowed lists are split into several queries,
        # whose union holds the best k of the whole list.
        if len(exclude) > IN_MAX:
            drop = set(exclude)
            wider = self.candidates(
                query, k + len(drop), session_keys=session_keys, rowids=rowids, exclude=()
            )
            return [i for i in wider if i not in drop][:k]
        if session_keys is not None and len(session_keys) > IN_MAX:
            return _union(
                self.candidates(query, k, session_keys=part, rowids=rowids, exclude=exclude)
                for part in _parts(session_keys)
            )
        if rowids is not None and len(rowids) > IN_MAX:
            # (ascending: membership by binary search, no set of 200k ints)
            share = len(rowids) / max(self.manifest.count, 1)
            if share >= WIDE_SHARE:
                wide = min(int(2 * k / share) + k, max(self.manifest.count, k))
                got = np.asarray(
                    self.candidates(
                        query, wide, session_keys=session_keys, rowids=None, exclude=exclude
                    ),
                    dtype=np.int64,
                )
                found: list[int] = got[members(got, rowids)].tolist()
                if len(found) >= k:
                    return found[:k]
            return _union(
                self.candidates(query, k, session_keys=session_keys, rowids=part, exclude=exclude)
                for part in _parts(rowids)
            )
        zvec = self._zvec
        if k > MAX_EF:  # beyond HNSW's list size: zvec's exact linear scan
            param = zvec.HnswQueryParam(is_linear=True)
        else:
            param = zvec.HnswQueryParam(ef=min(MAX_EF, max(self._ef, 2 * k)))
        docs = self._coll.query(
            zvec.Query("v", vector=query, param=param),
            topk=k,
            filter=filter_expression(session_keys, rowids, exclude),
            output_fields=[],
        )
        return [int(d.id) for d in docs]

    def count_present(self, rowids: Sequence[int]) -> int:
        found = 0
        for start in range(0, len(rowids), WRITE_BATCH):
            ids = [str(r) for r in rowids[start : start + WRITE_BATCH]]
            found += len(self._coll.fetch(ids, output_fields=[], include_vector=False))
        return found

    def _close(self) -> None:
        self._coll.close()


_S = TypeVar("_S", Sequence[int], npt.NDArray[np.int64])


def _parts(values: _S) -> Iterator[_S]:
    """``values`` in slices zvec takes in one ``IN`` list."""
    for start in range(0, len(values), IN_MAX):
        yield values[start : start + IN_MAX]


def _union(lists: Iterator[list[int]]) -> list[int]:
    """Every id of ``lists``, once, in order of first appearance (the caller rescores
    them and keeps the best)."""
    return list(dict.fromkeys(i for ids in lists for i in ids))


class ZvecBackend(AnnBackend):
    name = "zvec"

    def __init__(self, dims: int) -> None:
        self._dims = dims
        self._zvec = _zvec()

    def _schema(self) -> Any:
        zvec = self._zvec
        return zvec.CollectionSchema(
            name="chunks",
            fields=[
                zvec.FieldSchema(
                    "rowid",
                    zvec.DataType.INT64,
                    nullable=False,
                    index_param=zvec.InvertIndexParam(),
                ),
                zvec.FieldSchema(
                    "sess", zvec.DataType.INT64, nullable=False, index_param=zvec.InvertIndexParam()
                ),
                zvec.FieldSchema("created_us", zvec.DataType.INT64, nullable=False),
            ],
            vectors=zvec.VectorSchema(
                "v",
                zvec.DataType.VECTOR_FP32,
                dimension=self._dims,
                index_param=zvec.HnswIndexParam(
                    metric_type=zvec.MetricType.COSINE,
                    m=M,
                    ef_construction=EF_CONSTRUCTION,
                    quantize_type=zvec.QuantizeType.FP16,
                ),
            ),
        )

    def _write(self, coll: Any, batches: Iterator[RowBatch]) -> None:
        zvec = self._zvec
        for batch in batches:
            keys = batch.session_keys.tolist()
            created = batch.created_us.tolist()
            ids = batch.ids.tolist()
            for start in range(0, len(ids), WRITE_BATCH):
                docs = [
                    zvec.Doc(
                        id=str(ids[j]),
                        fields={"rowid": ids[j], "sess": keys[j], "created_us": created[j]},
                        vectors={"v": batch.matrix[j]},
                    )
                    for j in range(start, min(start + WRITE_BATCH, len(ids)))
                ]
                _check(coll.upsert(docs))

    def _finish(self, coll: Any) -> int:
        coll.optimize()  # builds the HNSW graph of what was written
        coll.flush()
        count = int(coll.stats.doc_count)
        coll.close()
        return count

    def build(self, folder: Path, generation: str, batches: Iterator[RowBatch]) -> tuple[str, int]:
        name = f"gen-{generation}"
        coll = self._zvec.create_and_open(str(folder / name), self._schema())
        try:
            self._write(coll, batches)
            return name, self._finish(coll)
        except BaseException:
            coll.close()
            shutil.rmtree(folder / name, ignore_errors=True)
            raise

    def merge(
        self,
        folder: Path,
        base: Manifest,
        generation: str,
        deletes: Sequence[int],
        batches: Iterator[RowBatch],
    ) -> tuple[str, int]:
        name = f"gen-{generation}"
        # A published generation is never written: the new one starts as a copy.
        shutil.copytree(folder / base.generation, folder / name)
        try:
            coll = self._zvec.open(str(folder / name))
            try:
                for start in range(0, len(deletes), WRITE_BATCH):
                    coll.delete([str(r) for r in deletes[start : start + WRITE_BATCH]])
                self._write(coll, batches)
                return name, self._finish(coll)
            except BaseException:
                coll.close()
                raise
        except BaseException:
            shutil.rmtree(folder / name, ignore_errors=True)
            raise

    def open(self, folder: Path, manifest: Manifest) -> BaseReader:
        zvec = self._zvec
        path = folder / manifest.generation
        if not path.is_dir():
            raise FileNotFoundError(f"generation {manifest.generation} is missing")
        coll = zvec.open(str(path), zvec.CollectionOption(read_only=True, enable_mmap=True))
        count = int(coll.stats.doc_count)
        if count != manifest.count:
            coll.close()
            raise ValueError(f"holds {count} vectors, its manifest says {manifest.count}")
        return _ZvecReader(manifest, coll)

    def collect(self, folder: Path, keep: Manifest | None) -> None:
        """Remove generations that are not published and that no process has open
        (zvec's readers hold a shared ``flock`` on the collection's ``LOCK``)."""
        for child in folder.iterdir():
            if not child.is_dir() or (keep is not None and child.name == keep.generation):
                continue
            lock = child / "LOCK"
            if not lock.exists():  # a build that died before zvec created it
                shutil.rmtree(child, ignore_errors=True)
                continue
            fd = os.open(lock, os.O_RDWR)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a reader still has it open: next time
                shutil.rmtree(child, ignore_errors=True)
            finally:
                os.close(fd)


def _check(statuses: Any) -> None:
    for status in statuses:
        if not status.ok():
            raise RuntimeError(f"zvec write failed: {status}")


class ZvecIndex(AnnIndex):
    """zvec HNSW base on disk plus an exact in-memory delta (see :mod:`mindfile.vector.ann`)."""

    name = "zvec"

    def __init__(self, db: Database, dims: int) -> None:
        super().__init__(db, dims, ZvecBackend(dims))
