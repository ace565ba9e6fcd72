"""``vector_index="lancedb"``: a LanceDB (Lance format) table on disk, shared by processes.

The base is the table ``chunks`` in ``<store file>.index/lancedb/``; a generation is a
Lance *version* of it. Lance versions are immutable (multi-version concurrency): a
merge commits new versions (delete the changed ids, append their current vectors) while
other processes keep reading the published one, which readers pin with ``checkout``.
A merge that dies leaves versions no manifest names; the next one restores the
published version first. The vector index is IVF-PQ: product-quantised codes (one
byte per two dimensions, an eighth of the float32 vectors), so a process's memory does
not grow with a copy of the corpus (Lance reads through its own buffers, not a memory
map: an IVF-flat index, whose partitions hold the full vectors, made every reading
process hold about the corpus's size). The PQ distances only pick candidates: three
times ``k`` are taken and rescored exactly from SQLite like every base candidate. Rows
appended after the index was trained are searched by a flat scan until ``optimize``
folds them in. How base, delta and merges fit together: :mod:`mindfile.vector.ann`
and docs/vector-indexes.md.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mindfile.errors import ConfigError
from mindfile.storage.db import Database
from mindfile.vector.ann import AnnBackend, AnnIndex, BaseReader
from mindfile.vector.ann_disk import Manifest, RowBatch, filter_expression

__all__ = ["LanceIndex"]

TABLE = "chunks"
#: Below this many rows no vector index is trained: a flat scan is exact and quick.
INDEX_MIN_ROWS = 4096
#: IVF partitions: about the square root of the row count. Partitions probed: this
#: share of them (PQ codes are small, so probing many is cheap; recall@10 0.999 at 100k
#: LoCoMo chunks, benchmarks/README.md).
PROBE_SHARE = 0.6
#: Dimensions per PQ sub-vector (one byte of code each).
SUB_VECTOR_DIMS = 2
#: Lance can re-rank this many times the asked candidates by their full vectors before
#: returning them. Off (1): it read ~5k random rows a search (27 ms at 100k); the exact
#: rescoring of three times k from SQLite does the same job for less.
REFINE_FACTOR = 1
#: Old versions are deleted by merges once they are this old (readers switch to the
#: newest published version before each search, so only a stalled reader can lose one;
#: its search fails, it reloads the manifest and retries).
KEEP_VERSIONS = timedelta(minutes=10)


def _lancedb() -> tuple[Any, Any]:
    try:
        import lancedb
        import pyarrow
    except ImportError as exc:
        raise ConfigError(
            "vector_index='lancedb' needs the lancedb package: pip install 'mindfile[lancedb]'"
        ) from exc
    return lancedb, pyarrow


def _partitions(rows: int) -> int:
    return max(1, min(4096, round(math.sqrt(rows))))


def _sub_vectors(dims: int) -> int:
    """PQ sub-vectors: about one per SUB_VECTOR_DIMS dimensions, dividing ``dims``."""
    return next(s for s in range(max(1, dims // SUB_VECTOR_DIMS), 0, -1) if dims % s == 0)


class _LanceReader(BaseReader):
    def __init__(self, manifest: Manifest, table: Any, indexed: bool) -> None:
        super().__init__(manifest)
        self._table = table
        self._nprobes = max(1, round(PROBE_SHARE * _partitions(manifest.count)))
        self._indexed = indexed

    def candidates(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        *,
        session_keys: Sequence[int] | None,
        rowids: npt.NDArray[np.int64] | None,
        exclude: Sequence[int],
    ) -> list[int]:
        condition = filter_expression(session_keys, rowids, exclude)
        search = (
            self._table.search(query, vector_column_name="vector")
            .distance_type("cosine")
            .limit(k)
            .select(["rowid", "_distance"])
        )
        if self._indexed:
            search = search.nprobes(self._nprobes)
            if REFINE_FACTOR > 1:
                search = search.refine_factor(REFINE_FACTOR)
        if condition is not None:
            search = search.where(condition, prefilter=True)
        return [int(r) for r in search.to_arrow()["rowid"].to_pylist()]

    def count_present(self, rowids: Sequence[int]) -> int:
        if not rowids:
            return 0
        ids = ",".join(str(int(r)) for r in rowids)
        return int(self._table.count_rows(f"rowid IN ({ids})"))

    def _close(self) -> None:
        self._table = None


class LanceBackend(AnnBackend):
    name = "lancedb"

    def __init__(self, dims: int) -> None:
        self._dims = dims
        self._lancedb, self._pa = _lancedb()

    def _schema(self) -> Any:
        pa = self._pa
        return pa.schema(
            [
                pa.field("rowid", pa.int64(), nullable=False),
                pa.field("sess", pa.int64(), nullable=False),
                pa.field("created_us", pa.int64(), nullable=False),
                pa.field("vector", pa.list_(pa.float32(), self._dims), nullable=False),
            ]
        )

    def _arrow(self, batch: RowBatch) -> Any:
        pa = self._pa
        vectors = pa.FixedSizeListArray.from_arrays(
            pa.array(batch.matrix.reshape(-1), type=pa.float32()), self._dims
        )
        return pa.Table.from_arrays(
            [
                pa.array(batch.ids),
                pa.array(batch.session_keys),
                pa.array(batch.created_us),
                vectors,
            ],
            schema=self._schema(),
        )

    def _connect(self, folder: Path) -> Any:
        return self._lancedb.connect(str(folder))

    def _index(self, table: Any) -> None:
        """(Re)train the vector index when the table is big enough; scalar indexes."""
        from lancedb.index import BTree, IvfPq

        rows = int(table.count_rows())
        if rows >= INDEX_MIN_ROWS:
            config = IvfPq(
                distance_type="cosine",
                num_partitions=_partitions(rows),
                num_sub_vectors=_sub_vectors(self._dims),
            )
            table.create_index("vector", config=config, replace=True)
        table.create_index("rowid", config=BTree(), replace=True)
        table.create_index("sess", config=BTree(), replace=True)

    def build(self, folder: Path, generation: str, batches: Iterator[RowBatch]) -> tuple[str, int]:
        conn = self._connect(folder)
        try:
            table = conn.create_table(TABLE, schema=self._schema(), mode="overwrite")
        except Exception:  # a damaged dataset: start over
            shutil.rmtree(folder / f"{TABLE}.lance", ignore_errors=True)
            table = conn.create_table(TABLE, schema=self._schema(), mode="overwrite")
        for batch in batches:
            table.add(self._arrow(batch))
        self._index(table)
        # Compacts the appended fragments; drops versions older than KEEP_VERSIONS.
        table.optimize(cleanup_older_than=KEEP_VERSIONS)
        return str(table.version), int(table.count_rows())

    def merge(
        self,
        folder: Path,
        base: Manifest,
        generation: str,
        deletes: Sequence[int],
        batches: Iterator[RowBatch],
    ) -> tuple[str, int]:
        table = self._connect(folder).open_table(TABLE)
        if int(table.version) != int(base.generation):
            # Versions a merge committed and died before publishing: back to the base.
            table.checkout(int(base.generation))
            table.restore()
        rows = [self._arrow(b) for b in batches]
        drop = {int(r) for r in deletes}
        for part in rows:
            drop.update(part["rowid"].to_pylist())
        ordered = sorted(drop)
        for start in range(0, len(ordered), 4096):
            ids = ",".join(str(r) for r in ordered[start : start + 4096])
            table.delete(f"rowid IN ({ids})")
        if rows:
            table.add(self._pa.concat_tables(rows))
        indexed = any("vector" in i.columns for i in table.list_indices())
        if not indexed and int(table.count_rows()) >= INDEX_MIN_ROWS:
            self._index(table)
        else:
            # Compacts small fragments and adds the new rows to the existing indexes.
            table.optimize(cleanup_older_than=KEEP_VERSIONS)
        return str(table.version), int(table.count_rows())

    def open(self, folder: Path, manifest: Manifest) -> BaseReader:
        table = self._connect(folder).open_table(TABLE)
        table.checkout(int(manifest.generation))
        count = int(table.count_rows())
        if count != manifest.count:
            raise ValueError(f"holds {count} vectors, its manifest says {manifest.count}")
        indexed = any("vector" in i.columns for i in table.list_indices())
        return _LanceReader(manifest, table, indexed)


class LanceIndex(AnnIndex):
    """LanceDB base on disk plus an exact in-memory delta (see :mod:`mindfile.vector.ann`)."""

    name = "lancedb"
    candidate_factor = 3.0  # PQ distances are coarse: rescore three times k

    def __init__(self, db: Database, dims: int) -> None:
        super().__init__(db, dims, LanceBackend(dims))
