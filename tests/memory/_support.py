"""Helpers for the agent-memory tests: a failing embedder and table snapshots."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from backends import is_postgres, raw

import mindfile
from mindfile.embed import HashEmbedder


class FlakyEmbedder:
    """The hash embedder, plus switches: fail on demand, or run a hook before embedding.

    Same ``model_id`` as ``"hash"``, so it can open stores made with that embedder.
    """

    def __init__(self) -> None:
        self.inner = HashEmbedder()
        self.fail = False
        self.before: Callable[[Sequence[str]], None] | None = None
        self.calls = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        if self.before is not None:
            hook, self.before = self.before, None
            hook(texts)
        if self.fail:
            raise RuntimeError("embedding service is down")
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self.inner.embed_query(text)


def snapshot(mem: mindfile.Mindfile) -> dict[str, Any]:
    """Every row an agent-memory write can touch, for before/after comparisons."""
    q = raw(mem).query
    fts = (
        "SELECT id, chunk_text FROM chunks ORDER BY id"  # Postgres: search_tsv is generated
        if is_postgres(mem)
        else "SELECT rowid, chunk_text FROM chunks_fts ORDER BY rowid"
    )
    return {
        "sessions": q("SELECT session_id, created_at FROM sessions ORDER BY 1"),
        "events": q("SELECT * FROM conversation_events ORDER BY 1, 2"),
        "notes": q("SELECT * FROM notes ORDER BY 1, 2"),
        "chunks": q("SELECT * FROM chunks ORDER BY id"),
        "vectors": q("SELECT * FROM chunks_vec ORDER BY 1"),
        "fts": q(fts),
        "facts": q("SELECT * FROM facts ORDER BY id"),
        "fact_history": q("SELECT * FROM fact_history ORDER BY id"),
        "state": q("SELECT session_id, state_json FROM session_state ORDER BY 1"),
    }


def fts_match(mem: mindfile.Mindfile, word: str) -> list[str]:
    """Chunk texts the FTS index itself returns for one word (checks the index, not the
    table; on Postgres the GIN-indexed ``search_tsv``)."""
    if is_postgres(mem):
        rows = raw(mem).query(
            "SELECT chunk_text FROM chunks WHERE search_tsv @@ plainto_tsquery('english', ?)",
            (word,),
        )
        return [str(r[0]) for r in rows]
    rows = mem.db.query(
        "SELECT c.chunk_text FROM chunks_fts JOIN chunks AS c ON c.id = chunks_fts.rowid "
        "WHERE chunks_fts MATCH ?",
        (f'"{word}"',),
    )
    return [str(r[0]) for r in rows]


def assert_index_consistent(mem: mindfile.Mindfile) -> None:
    """SQLite and FTS integrity; exactly one vector and one FTS row per chunk (Postgres:
    one vector per chunk; its constraints and generated columns need no check)."""
    if is_postgres(mem):
        chunks = raw(mem).scalar("SELECT count(*) FROM chunks")
        assert raw(mem).scalar("SELECT count(*) FROM chunks_vec") == chunks
        return
    assert mem.db.query("PRAGMA integrity_check") == [("ok",)]
    assert mem.db.query("PRAGMA foreign_key_check") == []
    mem.db.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')")
    chunks = mem.db.scalar("SELECT count(*) FROM chunks")
    assert mem.db.scalar("SELECT count(*) FROM chunks_vec") == chunks
    assert mem.db.scalar("SELECT count(*) FROM chunks_fts_docsize") == chunks
