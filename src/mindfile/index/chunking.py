"""Normalise text and split it into overlapping chunks.

Defaults are the seed's: at most 640 characters per chunk, 96 characters of overlap.
Splits prefer a sentence end, then any whitespace, inside the last quarter of a window,
so chunks rarely cut words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import blake3

from mindfile.errors import ConfigError

__all__ = ["ChunkSpec", "chunk_text", "content_hash", "normalize_text"]

_SENTENCE_END = re.compile(r"[.!?\n]\s")


@dataclass(frozen=True, slots=True)
class ChunkSpec:
    """Chunking options."""

    max_chars: int = 640
    overlap: int = 96

    def __post_init__(self) -> None:
        if self.max_chars < 16:
            raise ConfigError("chunk max_chars must be at least 16")
        if not 0 <= self.overlap < self.max_chars // 2:
            raise ConfigError("chunk overlap must be >= 0 and below half of max_chars")


def normalize_text(text: str) -> str:
    """Collapse runs of whitespace and strip; drop NUL and lone surrogates."""
    text = text.replace("\x00", " ")
    text = text.encode("utf-8", "replace").decode("utf-8")
    return " ".join(text.split())


def content_hash(text: str) -> str:
    """A 128-bit blake3 hex digest of the chunk text."""
    return blake3.blake3(text.encode("utf-8")).hexdigest(length=16)


def chunk_text(text: str, spec: ChunkSpec = ChunkSpec()) -> list[str]:
    """Split normalised ``text`` into chunks of at most ``spec.max_chars`` characters."""
    text = normalize_text(text)
    if not text:
        return []
    if len(text) <= spec.max_chars:
        return [text]
    chunks: list[str] = []
    start = 0
    n = len(text)
    while start < n:
        end = min(start + spec.max_chars, n)
        if end < n:
            end = _best_break(text, start, end, spec.max_chars)
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= n:
            break
        nxt = max(end - spec.overlap, start + 1)
        # Start the next chunk at a word boundary inside the overlap.
        space = text.find(" ", nxt, end)
        start = space + 1 if space != -1 else nxt
    return chunks


def _best_break(text: str, start: int, end: int, max_chars: int) -> int:
    floor = start + (max_chars * 3) // 4
    window = text[floor:end]
    best = -1
    for match in _SENTENCE_END.finditer(window):
        best = match.start() + 1
    if best != -1:
        return floor + best
    space = window.rfind(" ")
    return floor + space if space != -1 else end
