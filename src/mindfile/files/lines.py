"""Line-aware chunking for files: chunks follow line boundaries and know their lines.

A chunk is a run of whole lines of at most ``max_chars`` characters; a single line
longer than that is split into pieces (each piece keeps that line's number). Chunks
overlap by ``overlap_lines`` lines, so a passage cut at a boundary is whole in one of
them. Line numbers are 1-based and inclusive. Blank-only chunks are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from mindfile.errors import InvalidInputError

__all__ = ["FileChunk", "LineSpec", "chunk_lines"]


@dataclass(frozen=True, slots=True)
class LineSpec:
    """How files are cut: ``max_chars`` per chunk, ``overlap_lines`` shared lines."""

    max_chars: int = 1000
    overlap_lines: int = 2

    def __post_init__(self) -> None:
        for name, low, high in (("max_chars", 100, 100_000), ("overlap_lines", 0, 50)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidInputError(f"{name} must be an integer from {low} to {high}")


@dataclass(frozen=True, slots=True)
class FileChunk:
    text: str
    start_line: int
    end_line: int


def chunk_lines(text: str, spec: LineSpec = LineSpec()) -> list[FileChunk]:
    """Cut ``text`` into :class:`FileChunk` s (see the module docstring)."""
    pieces: list[tuple[int, str]] = []  # (line number, text without the newline)
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.rstrip()
        if len(line) <= spec.max_chars:
            pieces.append((number, line))
            continue
        for start in range(0, len(line), spec.max_chars):
            pieces.append((number, line[start : start + spec.max_chars]))
    chunks: list[FileChunk] = []
    i = 0
    while i < len(pieces):
        size = 0
        j = i
        while j < len(pieces) and (j == i or size + len(pieces[j][1]) + 1 <= spec.max_chars):
            size += len(pieces[j][1]) + 1
            j += 1
        body = "\n".join(p[1] for p in pieces[i:j])
        if body.strip():
            chunks.append(FileChunk(body, pieces[i][0], pieces[j - 1][0]))
        if j >= len(pieces):
            break
        # Step back by the overlap, but always move forward.
        back = j
        kept = 0
        while back > i + 1 and kept < spec.overlap_lines and pieces[back - 1][0] != pieces[i][0]:
            back -= 1
            kept += 1
        i = max(back, i + 1)
    return chunks
