"""Write-path helpers shared by notes and facts (embedding, sequences, scoped chunks).

Embedding always happens before the caller opens its transaction, so an embedder
failure leaves the store untouched; everything else runs inside ``db.atomic()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mindfile.embed.base import Vectors
from mindfile.errors import InvalidInputError
from mindfile.index.chunking import content_hash
from mindfile.index.embedding import prepare_vectors
from mindfile.index.pipeline import PreparedChunk
from mindfile.storage import log
from mindfile.storage.chunks import ChunkRow, find_chunk, insert_chunk
from mindfile.storage.db import Database

if TYPE_CHECKING:
    from mindfile._deps import WriteDeps

__all__ = [
    "check_text",
    "embed_texts",
    "ensure_session",
    "insert_chunks",
    "next_sequence",
    "scoped_chunks",
    "touch_session",
]


def check_text(value: str, what: str) -> str:
    """``value`` if it is valid unicode (SQLite stores UTF-8; lone surrogates cannot)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{what} contains invalid unicode (lone surrogates)") from exc
    return value


def embed_texts(engine: WriteDeps, texts: Sequence[str]) -> Vectors | None:
    """Document vectors for ``texts`` (validated) or :class:`EmbeddingError`; None when
    the store indexes in the background (the commit stage then queues jobs)."""
    engine.check_model()
    return prepare_vectors(
        engine.embedder,
        engine.db,
        texts,
        background=engine.indexing == "background",
        cache=engine.embedding_cache,
    )


def next_sequence(db: Database, session_id: str) -> int:
    """The session's next sequence: above the highest ever stored in it.

    The high-water mark survives deletes, so a deleted note's (or swept event's)
    sequence is never handed out again (:func:`mindfile.storage.log.next_sequence`).
    """
    return log.next_sequence(db, session_id)


def scoped_chunks(
    texts: Sequence[str], identity: str, metadata_json: str
) -> tuple[PreparedChunk, ...]:
    """Chunks whose content hash includes ``identity``.

    The core de-duplicates chunks by ``(session_id, content_hash)``; hashing the note
    (or fact) identity in keeps two items with the same text from sharing a chunk, so
    deleting one never removes the other's searchable content.
    """
    return tuple(
        PreparedChunk(text, content_hash(f"{identity}\x00{text}"), metadata_json) for text in texts
    )


def ensure_session(db: Database, session_id: str, now: str) -> None:
    """Create the session row if missing, without touching an existing one."""
    log.upsert_session(db, session_id, now, touch=False)


def touch_session(db: Database, session_id: str, now: str) -> None:
    """Create the session row if missing, else bump its ``updated_at``."""
    log.upsert_session(db, session_id, now)


def insert_chunks(
    db: Database,
    session_id: str,
    chunks: Sequence[PreparedChunk],
    vectors: Vectors | None,
    model_id: str,
    sequence: int,
    now: str,
) -> int:
    """Insert chunks with no backing event (and their vectors, or their jobs when
    ``vectors`` is None); returns rows added. They carry no neighbouring-event context."""
    added = 0
    rows = [None] * len(chunks) if vectors is None else list(vectors)
    for chunk, vector in zip(chunks, rows, strict=True):
        if find_chunk(db, session_id, chunk.content_hash) is not None:
            continue  # the same text twice within one item
        row = ChunkRow(
            session_id, chunk.text, chunk.content_hash, chunk.metadata_json, sequence, sequence
        )
        insert_chunk(db, row, vector, model_id, now)
        added += 1
    log.raise_high_water(db, session_id, sequence, now)
    return added
