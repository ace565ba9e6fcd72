"""Helpers for the context tests: an embedder with hand-set vectors, SQL spies."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

import mindfile
from mindfile.embed import HashEmbedder
from mindfile.embed.base import normalize

DIMS = 32
#: Table vectors use the first ``TABLE_DIMS`` coordinates; every other text gets a hash
#: vector in the remaining ones, so it is exactly orthogonal to every table vector.
TABLE_DIMS = 5


def basis(*weights: float) -> list[float]:
    """A vector from its first coordinates (the rest zero)."""
    return [*weights, *([0.0] * (DIMS - len(weights)))]


class TableEmbedder:
    """Fixed vectors for known texts, hash vectors otherwise: cosines you can do by hand.

    Unknown texts are exactly orthogonal to the table's vectors (cosine 0).
    """

    def __init__(self, table: Mapping[str, Sequence[float]]) -> None:
        self.table = {k: normalize(np.asarray(v, dtype=np.float32)) for k, v in table.items()}
        self._fallback = HashEmbedder(DIMS)

    @property
    def model_id(self) -> str:
        return f"test-context-table-{DIMS}"

    @property
    def dimensions(self) -> int:
        return DIMS

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = [self.table[t] if t in self.table else self._other(t) for t in texts]
        return np.stack(rows) if rows else np.zeros((0, DIMS), np.float32)

    def _other(self, text: str) -> npt.NDArray[np.float32]:
        vec = self._fallback.embed_query(text).copy()
        vec[:TABLE_DIMS] = 0.0
        return normalize(vec)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self.embed_documents([text])[0]


class FailingQueryEmbedder(TableEmbedder):
    """Embeds documents, fails on queries (the relevance leg degrades)."""

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        raise RuntimeError("embedding service is down")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def set_chunk(mem: mindfile.Mindfile, text: str, **columns: Any) -> None:
    """Set chunk columns (importance, pinned, created_at, expires_at...) by chunk text."""
    assignments = ", ".join(f"{name} = ?" for name in columns)
    mem.db.execute(
        f"UPDATE chunks SET {assignments} WHERE chunk_text = ?", [*columns.values(), text]
    )
    assert mem.db.changes() >= 1, text


@contextmanager
def sql_spy(mem: mindfile.Mindfile) -> Iterator[list[str]]:
    """Record every SQL statement the engine's database runs while inside."""
    seen: list[str] = []
    db = mem.db
    originals = {name: getattr(db, name) for name in ("query", "query_one", "execute")}

    def wrap(name: str) -> Any:
        def run(sql: str, *args: Any, **kwargs: Any) -> Any:
            seen.append(sql)
            return originals[name](sql, *args, **kwargs)

        return run

    for name in originals:
        setattr(db, name, wrap(name))
    try:
        yield seen
    finally:
        for name, fn in originals.items():
            setattr(db, name, fn)
