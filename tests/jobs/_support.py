"""Helpers for the background-indexing tests: controllable embedders and a fake clock."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt

import mindfile
from mindfile.embed import HashEmbedder

DIMS = 16
START = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)


class FakeClock:
    """A clock that moves only when told (``advance``)."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class ControlledEmbedder:
    """The hash embedder (same model id, so it opens hash stores) with switches.

    ``fail_next`` document calls raise, then they work; ``down`` makes every call (queries
    too) raise; every document call is recorded in ``calls`` (the texts it was given).
    """

    def __init__(self, dims: int = DIMS, *, fail_next: int = 0, down: bool = False) -> None:
        self._inner = HashEmbedder(dims)
        self.fail_next = fail_next
        self.down = down
        self.calls: list[list[str]] = []
        self.query_calls = 0
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dimensions(self) -> int:
        return self._inner.dimensions

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        with self._lock:
            self.calls.append(list(texts))
            if self.down:
                raise ConnectionError("embedding provider unreachable")
            if self.fail_next > 0:
                self.fail_next -= 1
                raise TimeoutError("embedding provider timed out")
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        with self._lock:
            self.query_calls += 1
            if self.down:
                raise ConnectionError("embedding provider unreachable")
        return self._inner.embed_query(text)

    @property
    def embedded_texts(self) -> list[str]:
        return [t for call in self.calls for t in call]


def open_store(
    path: Path | str,
    embedder: ControlledEmbedder | str | None = None,
    *,
    vector_index: str = "exact",
) -> mindfile.Mindfile:
    """A background-indexing store with the hash embedder (or ``embedder``)."""
    return mindfile.open(
        path,
        embedder=embedder if embedder is not None else f"hash:{DIMS}",
        indexing="background",
        vector_index=vector_index,
    )


def status_counts(mem: mindfile.Mindfile) -> dict[str, int]:
    """``{status: count}`` straight from SQL."""
    return {
        str(s): int(n)
        for s, n in mem.db.query("SELECT status, count(*) FROM memory_jobs GROUP BY status")
    }


def count(mem: mindfile.Mindfile, table: str) -> int:
    return int(mem.db.scalar(f"SELECT count(*) FROM {table}"))


def messages(n: int, prefix: str = "note") -> list[tuple[str, int, str]]:
    """``n`` single-chunk events in session ``s1``, each with distinct words."""
    return [("s1", i, f"{prefix} {i} about topic{i} and keyword{i % 3}") for i in range(1, n + 1)]
