"""The model store: the store's embedding model and re-embedding (``store_meta`` keys).

``embedding_model`` / ``embedding_dims`` name the model every vector was made with.
Re-embedding (:mod:`mindfile.index.reembed`) holds ``reembed_owner`` (who runs it,
``host:pid:start:thread``: :mod:`mindfile.jobs.owner`) and ``reembed_target`` (the new
model) while it stages vectors in the embedding cache, and switches the vectors and
the model in one transaction (:func:`switch_model`). :class:`ModelStore` is what
re-embedding uses; the functions below are its SQLite implementation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mindfile.storage.db import Database

__all__ = [
    "ModelStore",
    "SqliteModelStore",
    "chunk_batch",
    "clear_reembed",
    "meta",
    "missing_text_hashes",
    "reembed_claim",
    "set_text_hashes",
    "switch_model",
]

META = "SELECT key, value FROM store_meta WHERE key IN ({})"

SET_META = "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)"

CHUNK_BATCH = """
SELECT id, chunk_text, text_hash FROM chunks WHERE id > ? ORDER BY id LIMIT ?
"""

SET_TEXT_HASH = "UPDATE chunks SET text_hash = ? WHERE id = ?"

MISSING_TEXT_HASHES = "SELECT id, chunk_text FROM chunks WHERE text_hash IS NULL"

# The new model's vector for every chunk whose text it has staged. INSERT OR REPLACE
# deletes and re-inserts, so the chunks_vec triggers log every change and every
# process's derived index re-reads them.
REPLACE_VECTORS = """
INSERT OR REPLACE INTO chunks_vec (chunk_rowid, embedding_blob, embedding_model)
SELECT c.id, ec.embedding_blob, ?1
FROM chunks AS c
JOIN embedding_cache AS ec ON ec.model_id = ?1 AND ec.text_hash = c.text_hash
WHERE length(ec.embedding_blob) = ?2
"""

# Chunks written meanwhile whose text was not staged: their old vector goes, a job
# embeds them with the new model.
UNSTAGED = """
SELECT c.id FROM chunks AS c
WHERE NOT EXISTS (
    SELECT 1 FROM chunks_vec AS v WHERE v.chunk_rowid = c.id AND v.embedding_model = ?1
)
"""


class ModelStore(Protocol):
    """Re-embedding's rows (backend-neutral). Every method runs inside the caller's
    transaction when one is open; :meth:`switch_model` must run inside one."""

    def reembed_holder(self) -> tuple[str | None, str | None]:
        """``(owner, target model)`` of the running re-embedding, or ``(None, None)``."""
        ...

    def claim_reembed(self, owner: str, target: str) -> None:
        """Record who re-embeds the store to which model."""
        ...

    def clear_reembed(self) -> None:
        """Forget the running re-embedding."""
        ...

    def chunk_batch(self, after: int, limit: int) -> list[tuple[int, str, str | None]]:
        """``(rowid, text, text hash or None)`` of up to ``limit`` chunks above ``after``,
        by rowid."""
        ...

    def missing_text_hashes(self) -> list[tuple[int, str]]:
        """``(rowid, text)`` of the chunks without a text hash."""
        ...

    def set_text_hashes(self, pairs: Sequence[tuple[str, int]]) -> None:
        """Backfill text hashes (``(hash, rowid)`` pairs)."""
        ...

    def switch_model(self, model_id: str, dims: int) -> list[int]:
        """Put the vectors staged for ``model_id`` in place (the embedding cache holds
        them by text hash) and make it the store's model; returns the chunks that still
        need a vector (their old one is dropped)."""
        ...


class SqliteModelStore:
    """:class:`ModelStore` on ``store_meta``, ``chunks``, ``chunks_vec`` and the cache."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def reembed_holder(self) -> tuple[str | None, str | None]:
        held = meta(self.db, "reembed_owner", "reembed_target")
        return held.get("reembed_owner"), held.get("reembed_target")

    def claim_reembed(self, owner: str, target: str) -> None:
        with self.db.atomic():
            reembed_claim(self.db, owner, target)

    def clear_reembed(self) -> None:
        clear_reembed(self.db)

    def chunk_batch(self, after: int, limit: int) -> list[tuple[int, str, str | None]]:
        return chunk_batch(self.db, after, limit)

    def missing_text_hashes(self) -> list[tuple[int, str]]:
        return missing_text_hashes(self.db)

    def set_text_hashes(self, pairs: Sequence[tuple[str, int]]) -> None:
        set_text_hashes(self.db, list(pairs))

    def switch_model(self, model_id: str, dims: int) -> list[int]:
        with self.db.atomic():
            return switch_model(self.db, model_id, dims)


def meta(db: Database, *keys: str) -> dict[str, str]:
    rows = db.query(META.format(", ".join("?" * len(keys))), keys)
    return {str(k): str(v) for k, v in rows}


def reembed_claim(db: Database, owner: str, target: str) -> None:
    """Record who re-embeds to what (inside the caller's ``db.atomic()``)."""
    db.executemany(SET_META, [("reembed_owner", owner), ("reembed_target", target)])


def clear_reembed(db: Database) -> None:
    db.execute("DELETE FROM store_meta WHERE key IN ('reembed_owner', 'reembed_target')")


def chunk_batch(db: Database, after: int, limit: int) -> list[tuple[int, str, str | None]]:
    return [
        (int(i), str(t), None if h is None else str(h))
        for i, t, h in db.query(CHUNK_BATCH, (after, limit))
    ]


def set_text_hashes(db: Database, pairs: list[tuple[str, int]]) -> None:
    """Backfill ``chunks.text_hash`` (``(hash, id)`` pairs) for chunks made before 0011."""
    db.executemany(SET_TEXT_HASH, pairs)


def missing_text_hashes(db: Database) -> list[tuple[int, str]]:
    return [(int(i), str(t)) for i, t in db.query(MISSING_TEXT_HASHES)]


def switch_model(db: Database, model_id: str, dims: int) -> list[int]:
    """Inside ``db.atomic()``: put the staged vectors in place and make ``model_id`` the
    store's model. Returns the chunks that still need a vector (the caller queues them).
    """
    db.execute(REPLACE_VECTORS, (model_id, dims * 4))
    unstaged = [int(r[0]) for r in db.query(UNSTAGED, (model_id,))]
    if unstaged:
        db.execute(
            "DELETE FROM chunks_vec WHERE chunk_rowid IN (SELECT value FROM json_each(?))",
            (_ids(unstaged),),
        )
    db.executemany(SET_META, [("embedding_model", model_id), ("embedding_dims", str(dims))])
    clear_reembed(db)
    return unstaged


def _ids(ids: list[int]) -> str:
    return "[" + ",".join(str(i) for i in ids) + "]"
