"""A :class:`~mindfile.retrieve.reranker.Reranker` on any chat model (optional).

    from mindfile.llm import OpenAICompatibleClient, llm_reranker

    llm = OpenAICompatibleClient("http://127.0.0.1:11434/v1", model="llama3.1")
    mem = mindfile.open("memory.db", reranker=llm_reranker(llm))

Each search then makes one chat call: the question and its first 50 hits (each cut to
``max_chars``), numbered; the model answers JSON under :data:`RERANK_SCHEMA`, a score
from 0 to 10 for each number it rates. Hits it does not rate score -1 (they follow the
rated ones, in fused order). A failed call or an answer that breaks the schema (an
unknown or repeated number) raises :class:`~mindfile.errors.LLMError`, which the search
turns into the fused order and a ``degraded`` note (docs/retrieval.md "Reranking").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mindfile.errors import InvalidInputError, LLMError
from mindfile.llm.client import ChatClient, complete_json

__all__ = ["RERANK_PROMPT", "RERANK_SCHEMA", "LLMReranker", "llm_reranker"]

RERANK_PROMPT = (
    "You judge which memories help answer a question. Rate each numbered memory from "
    "0 (unrelated) to 10 (states what the question asks). A memory that only shares "
    "words with the question is not relevant. Answer with JSON only."
)

RERANK_SCHEMA: Mapping[str, Any] = {
    "title": "mindfile_rerank",
    "type": "object",
    "properties": {
        "scores": {
            "type": "array",
            "maxItems": 200,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "minimum": 1},
                    "score": {"type": "number", "minimum": 0, "maximum": 10},
                },
                "required": ["id", "score"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["scores"],
    "additionalProperties": False,
}

#: The score of a memory the model did not rate: after every rated one.
UNRATED = -1.0


class LLMReranker:
    """Scores memories for a question with one chat call (:func:`llm_reranker`)."""

    def __init__(self, client: ChatClient, *, max_chars: int, max_tokens: int | None) -> None:
        self.client = client
        self.max_chars = max_chars
        self.max_tokens = max_tokens

    def __repr__(self) -> str:
        return f"LLMReranker({getattr(self.client, 'model', '?')!r})"

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """A score from 0 to 10 per text (``UNRATED``, -1, for those the model skipped)."""
        if not texts:
            return []
        numbered = "\n".join(
            f"[{i}] {' '.join(str(t).split())[: self.max_chars]}"
            for i, t in enumerate(texts, start=1)
        )
        messages = [
            {"role": "system", "content": RERANK_PROMPT},
            {
                "role": "user",
                "content": (
                    f"<question>{query}</question>\n<memories>\n{numbered}\n</memories>\n"
                    f'Answer {{"scores": [{{"id": <number>, "score": <0-10>}}, ...]}}, '
                    "one entry per memory."
                ),
            },
        ]
        data = complete_json(
            self.client, messages, schema=RERANK_SCHEMA, max_tokens=self.max_tokens
        )
        scores = [UNRATED] * len(texts)
        seen: set[int] = set()
        for item in data["scores"]:
            i = int(item["id"])
            if i > len(texts) or i in seen:
                why = "unknown" if i > len(texts) else "repeated"
                raise LLMError(
                    f"the reranking answer names a {why} memory number {i}",
                    reason="schema_invalid",
                )
            seen.add(i)
            scores[i - 1] = float(item["score"])
        return scores


def llm_reranker(
    client: ChatClient, *, max_chars: int = 800, max_tokens: int | None = None
) -> LLMReranker:
    """A reranker asking ``client`` (any :class:`~mindfile.llm.ChatClient`) to rate a
    search's first hits; each hit's text is cut to ``max_chars`` characters."""
    if not callable(getattr(client, "complete", None)):
        raise InvalidInputError("client must be a ChatClient (a complete() method)")
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise InvalidInputError("max_chars must be a positive integer")
    return LLMReranker(client, max_chars=max_chars, max_tokens=max_tokens)
