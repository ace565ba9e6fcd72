"""The write-path indexing pipeline: extract text, chunk it, hash it."""

from mindfile.index.chunking import ChunkSpec, chunk_text, content_hash, normalize_text
from mindfile.index.extract import extract_role, extract_text

__all__ = [
    "ChunkSpec",
    "chunk_text",
    "content_hash",
    "extract_role",
    "extract_text",
    "normalize_text",
]
