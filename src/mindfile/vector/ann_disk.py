"""The on-disk side of the ANN indexes (:mod:`mindfile.vector.ann`): the rows they are
built from, where they live, the manifest that says which generation is current, the
build lock, and the filter expression both backends understand."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import tempfile
import threading
import urllib.parse
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mindfile.storage.db import Database
from mindfile.storage.index_source import STORE_ID_KEY, VectorRows, index_source

__all__ = [
    "BUILD_LOCK",
    "MANIFEST",
    "STORE_ID_KEY",
    "Manifest",
    "RowBatch",
    "file_lock",
    "filter_expression",
    "fsync_dir",
    "index_root",
    "read_after",
    "read_ids",
    "row_batch",
    "save_json",
    "session_key",
    "store_id",
]

logger = logging.getLogger("mindfile")

FORMAT = 1
MANIFEST = "manifest.json"
BUILD_LOCK = "build.lock"


def store_id(db: Database, *, create: bool = True) -> str | None:
    """The store's id for the manifests of its on-disk indexes, made on first use (one
    small write); None when it has none and ``create`` is False (a read-only store)."""
    return index_source(db).store_id(create=create)


@lru_cache(maxsize=65536)
def session_key(session_id: str) -> int:
    """A signed 64-bit key of a session id: what the on-disk indexes filter on.

    Hashing keeps session ids (user text) out of the index files and out of filter
    expressions (no quoting). A collision can only add candidates, which the rescoring
    step drops (it checks the session in SQLite).
    """
    digest = hashlib.blake2b(session_id.encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "little", signed=True)


@lru_cache(maxsize=4096)  # a store_many writes one timestamp for all its chunks
def _created_us(text: str) -> int:
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1_000_000)
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True, slots=True)
class RowBatch:
    """Rows read from SQLite for an index: ids ascending, vectors, scalar fields."""

    ids: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]
    sessions: list[str]
    created_us: npt.NDArray[np.int64]

    @property
    def session_keys(self) -> npt.NDArray[np.int64]:
        return np.fromiter((session_key(s) for s in self.sessions), np.int64, len(self.sessions))

    def __len__(self) -> int:
        return len(self.ids)

    def head(self, n: int) -> RowBatch:
        """The first ``n`` rows."""
        return RowBatch(self.ids[:n], self.matrix[:n], self.sessions[:n], self.created_us[:n])


def row_batch(rows: VectorRows) -> RowBatch:
    """A batch read with ``created=True`` as the indexes take it (times in microseconds)."""
    if rows.created is None:  # read without times
        return RowBatch(rows.ids, rows.matrix, rows.sessions, np.zeros(len(rows.ids), np.int64))
    us = np.fromiter((_created_us(t) for t in rows.created), np.int64, len(rows.created))
    return RowBatch(rows.ids, rows.matrix, rows.sessions, us)


def read_after(db: Database, after: int, dims: int, limit: int | None = None) -> RowBatch:
    """Vectors with ``chunk_rowid > after`` in id order (at most ``limit``)."""
    return row_batch(index_source(db).vectors_after(after, dims, limit, created=True))


def read_ids(db: Database, rowids: Sequence[int], dims: int) -> RowBatch:
    """The vectors of ``rowids`` that exist, in id order."""
    return row_batch(index_source(db).vectors_by_ids(rowids, dims, created=True))


def index_root(db: Database) -> tuple[Path, bool]:
    """Where a store's on-disk indexes live, and whether that folder is temporary.

    ``<store file>.index/`` next to the file; a private temporary folder (removed on
    close) for an in-memory store.
    """
    path = db.path
    if not db.in_memory and path.startswith("file:"):
        parts = urllib.parse.urlsplit(path)
        query = urllib.parse.parse_qs(parts.query)
        path = "" if "memory" in query.get("mode", []) else urllib.parse.unquote(parts.path)
        if path in ("", ":memory:"):
            path = ""
    if db.in_memory or not path:
        return Path(tempfile.mkdtemp(prefix="mindfile-index-")), True
    file = Path(path).expanduser().resolve()
    return file.with_name(file.name + ".index"), False


@dataclass(frozen=True, slots=True)
class Manifest:
    """What a published generation holds (``manifest.json``)."""

    backend: str
    store: str
    model: str
    dims: int
    generation: str
    max_id: int
    changes_seq: int
    count: int
    built_at: str
    #: Ids of all-zero vectors (an embedder's answer for text without a known token):
    #: they have no cosine distance, so the ANN search cannot rank them; every search
    #: adds them to the candidates (the rescoring gives them 0.0).
    zeros: tuple[int, ...] = ()
    format: int = FORMAT

    @classmethod
    def load(cls, path: Path) -> Manifest | None:
        """The manifest at ``path``; None when missing or unreadable (rebuild)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            data["zeros"] = tuple(int(z) for z in data.get("zeros", ()))
            manifest = cls(**data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            logger.warning("ignoring unreadable index manifest %s: %s", path, exc)
            return None
        if manifest.format != FORMAT:
            return None
        return manifest

    def save(self, path: Path) -> None:
        save_json(path, asdict(self))


#: np.load parses each header with ast.literal_eval, and CPython 3.11's parser is not
#: safe when threads parse at once ("AST constructor recursion depth mismatch", seen
#: under the thread stress test): every published index loads one array at a time.
LOAD_LOCK = threading.Lock()


def load_array(path: Path, *, mapped: bool = True) -> npt.NDArray[Any]:
    """A published ``.npy`` array, memory-mapped read-only (or read, ``mapped=False``).

    A mapped array is returned as a plain ``ndarray`` view of the map (which it keeps
    alive): ``np.memmap``'s Python-level ``__getitem__``/``__array_finalize__`` cost
    ~5 us per slice, ~0.3 ms per hybrid search at 117k chunks.
    """
    with LOAD_LOCK:
        array: npt.NDArray[Any] = np.load(
            path, mmap_mode="r" if mapped else None, allow_pickle=False
        )
    return array.view(np.ndarray) if mapped else array


def save_json(path: Path, data: object) -> None:
    """Write a manifest atomically: a temporary file, fsync, rename over, fsync the
    folder (shared by every on-disk index)."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make a rename or a new entry in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def file_lock(path: Path, *, blocking: bool) -> Iterator[bool]:
    """An exclusive ``flock`` on ``path`` (its own file description, so threads of one
    process exclude each other too). Yields whether it was taken; released by the
    kernel if the process dies."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def filter_expression(
    session_keys: Sequence[int] | None,
    rowids: Sequence[int] | npt.NDArray[np.int64] | None,
    exclude: Sequence[int],
) -> str | None:
    """The SQL-like filter both backends apply inside their search: sessions (by
    :func:`session_key`), allowed rowids, and excluded (changed) rowids; None = none."""
    terms = []
    if session_keys is not None:
        terms.append(f"sess IN ({','.join(str(int(s)) for s in session_keys)})")
    if rowids is not None:
        terms.append(f"rowid IN ({','.join(map(str, np.asarray(rowids, np.int64).tolist()))})")
    if exclude:
        terms.append(f"rowid NOT IN ({','.join(str(int(r)) for r in exclude)})")
    return " AND ".join(terms) or None
