"""Realistic assistant-chat-length messages from LoCoMo, shared by scale.py and load.py.

LoCoMo turns are short (~120 characters). Real agent memory holds assistant-length
messages (~1,000 characters, several chunks each), so messages here are LoCoMo
sentences recombined with a seeded RNG until a drawn target length is reached. Queries
are LoCoMo questions, which are never stored text. The data is read in place from
``../shared/data/locomo/locomo10.json`` (relative to the repo root) or ``--locomo``;
it is never copied into the repository.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from _common import LOCOMO, locomo_texts

__all__ = ["DEFAULT_LOCOMO", "ChatCorpus", "load_locomo"]

DEFAULT_LOCOMO = LOCOMO
#: Message length in characters: a clipped normal around this mean (assistant replies).
MEAN_CHARS = 950
SD_CHARS = 450
MIN_CHARS, MAX_CHARS = 120, 3000

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def load_locomo(path: Path) -> tuple[list[str], list[str]]:
    """All sentences of every dialogue turn, and all QA questions, of a LoCoMo file."""
    turns, questions = locomo_texts(path)
    sentences = [s for text in turns for s in _SENTENCE_END.split(text) if len(s) > 1]
    return sentences, questions


class ChatCorpus:
    """Deterministic ~1,000-character messages and held-out questions."""

    def __init__(self, path: Path, seed: int = 7) -> None:
        if not path.is_file():
            raise SystemExit(f"LoCoMo data not found at {path}: pass --locomo PATH (locomo10.json)")
        self.path = path.resolve()
        self.sentences, questions = load_locomo(path)
        random.Random(seed).shuffle(questions)
        self.questions = questions
        self._rng = random.Random(seed + 1)

    def message(self) -> str:
        """One message: random sentences until a length drawn around ``MEAN_CHARS``."""
        rng = self._rng
        target = min(MAX_CHARS, max(MIN_CHARS, int(rng.gauss(MEAN_CHARS, SD_CHARS))))
        parts: list[str] = []
        size = 0
        while size < target:
            s = self.sentences[rng.randrange(len(self.sentences))]
            parts.append(s)
            size += len(s) + 1
        return " ".join(parts)

    def messages(self) -> Iterator[str]:
        while True:
            yield self.message()

    def queries(self, n: int, offset: int = 0) -> list[str]:
        """``n`` questions starting at ``offset``, cycling through the pool."""
        qs = self.questions
        return [qs[(offset + i) % len(qs)] for i in range(n)]


def events(
    texts: Sequence[str], start: int, sessions: int
) -> list[tuple[str, int, dict[str, str]]]:
    """``store_many`` events: message ``start + i`` goes to session ``(start + i) % sessions``
    with sequence ``(start + i) // sessions``, roles alternating."""
    out = []
    for i, text in enumerate(texts, start):
        seq = i // sessions
        role = "user" if seq % 2 == 0 else "assistant"
        out.append((f"chat-{i % sessions:04d}", seq, {"role": role, "content": text}))
    return out
