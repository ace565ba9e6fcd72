"""Helpers for the core tests: row counts, test embedders, a brute-force KNN oracle,
many threads at once, and None's references a call spends."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from backends import is_postgres, raw

import mindfile
from mindfile.embed import HashEmbedder
from mindfile.embed.base import normalize

TABLES = ("sessions", "conversation_events", "session_state", "chunks", "chunks_vec", "files")


def counts(mem: mindfile.Mindfile) -> dict[str, int]:
    """Row counts of every core table, plus the FTS index's own row count."""
    out = {t: int(raw(mem).scalar(f"SELECT count(*) FROM {t}")) for t in TABLES}
    out["chunks_fts"] = fts_rows(mem)
    return out


def fts_rows(mem: mindfile.Mindfile) -> int:
    """Rows in the FTS index itself (the docsize shadow table, not the content table);
    on Postgres, chunks with their generated ``search_tsv``."""
    if is_postgres(mem):
        return int(raw(mem).scalar("SELECT count(*) FROM chunks WHERE search_tsv IS NOT NULL"))
    return int(mem.db.scalar("SELECT count(*) FROM chunks_fts_docsize"))


def assert_consistent(mem: mindfile.Mindfile) -> None:
    """SQLite and FTS integrity, and one vector and one FTS row per chunk (on Postgres:
    one vector per chunk, and no event link to a missing chunk)."""
    if is_postgres(mem):
        c = counts(mem)
        assert c["chunks"] == c["chunks_vec"] == c["chunks_fts"]
        dangling = (
            "SELECT count(*) FROM event_chunks WHERE chunk_rowid NOT IN (SELECT id FROM chunks)"
        )
        assert raw(mem).scalar(dangling) == 0
        return
    assert mem.db.query("PRAGMA integrity_check") == [("ok",)]
    mem.db.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')")
    c = counts(mem)
    assert c["chunks"] == c["chunks_vec"] == c["chunks_fts"]
    assert int(mem.db.scalar("SELECT count(*) FROM chunks_fts")) == c["chunks"]


class TableEmbedder:
    """Fixed vectors for known texts (hash vectors otherwise): scores you can do by hand."""

    def __init__(self, table: Mapping[str, Sequence[float]], dims: int = 3) -> None:
        self.table = {k: np.asarray(v, dtype=np.float32) for k, v in table.items()}
        self._dims = dims
        self._fallback = HashEmbedder(dims)

    @property
    def model_id(self) -> str:
        return f"test-table-{self._dims}"

    @property
    def dimensions(self) -> int:
        return self._dims

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = [self.table[t] if t in self.table else self._fallback.embed_query(t) for t in texts]
        return normalize(np.stack(rows)) if rows else np.zeros((0, self._dims), np.float32)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self.embed_documents([text])[0]


class BrokenEmbedder:
    """Raises (or returns garbage) on every call: for the all-or-nothing write path."""

    def __init__(self, how: str = "raise", dims: int = 8) -> None:
        self.how = how
        self._dims = dims

    @property
    def model_id(self) -> str:
        return f"test-broken-{self._dims}"

    @property
    def dimensions(self) -> int:
        return self._dims

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.how == "raise":
            raise RuntimeError("provider is down")
        if self.how == "shape":
            return np.ones((len(texts), self._dims + 1), dtype=np.float32)
        return np.full((len(texts), self._dims), np.nan, dtype=np.float32)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self.embed_documents([text])[0]


def oracle(
    mem: mindfile.Mindfile,
    query: npt.NDArray[np.float32],
    k: int,
    *,
    sessions: Sequence[str] | None = None,
    rowids: Sequence[int] | None = None,
) -> list[tuple[int, float]]:
    """Brute-force top-k cosine over ``chunks_vec``, straight from SQLite."""
    column = "v.embedding::real[]" if is_postgres(mem) else "v.embedding_blob"
    rows = raw(mem).query(
        f"SELECT v.chunk_rowid, {column}, c.session_id FROM chunks_vec AS v "
        "JOIN chunks AS c ON c.id = v.chunk_rowid"
    )
    scored = []
    for rowid, blob, session in rows:
        if sessions is not None and session not in sessions:
            continue
        if rowids is not None and rowid not in rowids:
            continue
        arr = np.asarray(blob) if isinstance(blob, list) else np.frombuffer(blob, dtype="<f4")
        vec = arr.astype(np.float64)
        scored.append((int(rowid), float(vec @ query.astype(np.float64))))
    scored.sort(key=lambda item: -item[1])
    return scored[: max(k, 0)]


def assert_same_ranking(
    got: Sequence[tuple[int, float]], full: Sequence[tuple[int, float]], k: int, tol: float = 1e-5
) -> None:
    """``got`` is the top ``k`` of the oracle's ``full`` ranking: same scores in order, and
    each id is one the oracle puts at that score (near-ties may come in either order)."""
    expected = list(full[:k])
    assert len(got) == len(expected), (got, expected)
    for (_, gs), (_, es) in zip(got, expected, strict=True):
        assert abs(gs - es) <= tol, (got, expected)
    assert len({gid for gid, _ in got}) == len(got), got
    for gid, gs in got:
        assert any(eid == gid and abs(es - gs) <= tol for eid, es in full), (gid, got, full)


class CountingEmbedder:
    """The hash embedder (``dims`` wide) posing as a remote provider (not ``local``),
    recording every document text it is sent in ``sent``."""

    def __init__(self, dims: int = 32) -> None:
        self._inner = HashEmbedder(dims)
        self.sent: list[str] = []

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dimensions(self) -> int:
        return self._inner.dimensions

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.sent.extend(texts)
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self._inner.embed_query(text)


def in_threads(work: Callable[[], None], threads: int, *, timeout: float = 120.0) -> None:
    """Run ``work`` in ``threads`` threads at once, switching as often as the interpreter
    can (``sys.setswitchinterval(1e-6)``); fail on a thread that hangs or on the first
    error one of them raised."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # reported below
            errors.append(exc)

    started = [threading.Thread(target=run, daemon=True) for _ in range(threads)]
    try:
        for t in started:
            t.start()
        for t in started:
            t.join(timeout)
    finally:
        sys.setswitchinterval(old)
    assert not any(t.is_alive() for t in started), "a thread hangs"
    if errors:
        raise errors[0]


def count_side_thread_legs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make every search run its BM25 leg on the side thread (no size threshold, even
    with other searches in flight, so that threads race for it); the returned list's
    one number counts the legs it ran (mindfile/retrieve/overlap.py)."""
    from mindfile.retrieve import retriever
    from mindfile.retrieve.overlap import SideThread

    monkeypatch.setattr(retriever, "OVERLAP_MIN_DOCS", 0)
    monkeypatch.setattr(retriever, "alone", lambda: True)
    monkeypatch.setattr("mindfile.retrieve.overlap.overlap_allowed", lambda: True)
    monkeypatch.setattr(retriever, "overlap_allowed", lambda: True)
    started = [0]
    original = SideThread.try_start

    def counting(self: SideThread, fn: Callable[[], Any]) -> Future[Any] | None:
        future: Future[Any] | None = original(self, fn)
        if future is not None:
            started[0] += 1
        return future

    monkeypatch.setattr(SideThread, "try_start", counting)
    return started


def none_lost(call: Callable[[], object], calls: int) -> int:
    """How many of None's references ``calls`` calls of ``call`` took (after one call
    to warm caches and lazy imports): a C extension returning None without a reference
    of its own takes one a call (tests/core/test_refcounts.py)."""
    call()
    before = sys.getrefcount(None)
    for _ in range(calls):
        call()
    return before - sys.getrefcount(None)
