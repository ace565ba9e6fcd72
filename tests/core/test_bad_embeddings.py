"""Embedders that return garbage get typed errors, never NaN scores (issue 8 part 3)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from backends import raw

import mindfile
from mindfile.embed import HashEmbedder
from mindfile.errors import EmbeddingError, InvalidInputError

DIMS = 64

GARBAGE: dict[str, Any] = {
    "nan": [math.nan] * DIMS,
    "inf": [math.inf] + [0.0] * (DIMS - 1),
    "short": [0.1] * (DIMS - 1),
    "none": None,
    "string": "not a vector",
    "ragged": [[0.1, 0.2], [0.3]],
}


class BadQueries(HashEmbedder):
    """Good document vectors, a broken query vector."""

    def __init__(self, garbage: Any) -> None:
        super().__init__(DIMS)
        self.garbage = garbage

    def embed_query(self, text: str) -> Any:
        return self.garbage


class BadDocuments(HashEmbedder):
    """A broken document batch."""

    def __init__(self, garbage: Any) -> None:
        super().__init__(DIMS)
        self.garbage = garbage

    def embed_documents(self, texts: Sequence[str]) -> Any:
        return self.garbage


def _store(path: Path) -> None:
    with mindfile.open(path, embedder=HashEmbedder(DIMS)) as mem:
        mem.store("s", 1, {"role": "user", "content": "I moved to Lisbon in May"})
        mem.store("s", 2, {"role": "user", "content": "my sister paints"})


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_a_broken_query_embedding_degrades_to_full_text(store_location: str, kind: str) -> None:
    path = store_location
    _store(path)
    with mindfile.open(path, embedder=BadQueries(GARBAGE[kind])) as mem:
        hits = mem.search("Lisbon")
        assert hits.mode == "fts" and hits.degraded and "vector search unavailable" in hits.degraded
        assert hits[0].text.startswith("I moved to Lisbon")
        assert all(math.isfinite(h.score) for h in hits)
        with pytest.raises(EmbeddingError):
            mem.search("Lisbon", mode="vector")
        ctx = mem.build_context("s", "Lisbon", token_budget=500)
        assert ctx.degraded and "relevance leg unavailable" in ctx.degraded


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_a_broken_document_embedding_writes_nothing(store_location: str, kind: str) -> None:
    with mindfile.open(store_location, embedder=BadDocuments(GARBAGE[kind])) as mem:
        with pytest.raises(EmbeddingError):
            mem.store("s", 1, {"role": "user", "content": "hello there"})
        with pytest.raises(EmbeddingError):
            mem.store_note("memory:u", "n", "a note")
        assert mem.list_sessions() == []
        assert raw(mem).scalar("SELECT count(*) FROM chunks") == 0


@pytest.mark.parametrize("kind", ["nan", "inf", "short", "string", "ragged"])
def test_a_caller_given_query_embedding_is_validated(store_location: str, kind: str) -> None:
    path = store_location
    _store(path)
    with mindfile.open(path, embedder=HashEmbedder(DIMS)) as mem:
        with pytest.raises(InvalidInputError):
            mem.search("Lisbon", query_embedding=GARBAGE[kind])
        with pytest.raises(InvalidInputError):
            mem.build_context("s", "Lisbon", token_budget=500, query_embedding=GARBAGE[kind])
        ok = mem.search("Lisbon", query_embedding=np.ones(DIMS))
        assert all(math.isfinite(h.score) for h in ok)
