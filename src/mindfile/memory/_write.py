"""Write-path helpers shared by notes and facts (embedding, text checks, scoped chunks).

Embedding always happens before the caller opens its transaction, so an embedder
failure leaves the store untouched; everything else (sessions, sequences, events and
chunks through ``engine.stores.sessions``) runs inside ``db.atomic()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mindfile.embed.base import Vectors
from mindfile.errors import InvalidInputError
from mindfile.index.chunking import content_hash
from mindfile.index.embedding import prepare_vectors
from mindfile.index.pipeline import PreparedChunk

if TYPE_CHECKING:
    from mindfile._deps import WriteDeps

__all__ = [
    "check_text",
    "embed_texts",
    "scoped_chunks",
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
