"""A scripted :class:`~mindfile.llm.ChatClient` for tests of code built on the seam."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mindfile.errors import LLMError
from mindfile.llm.client import ChatMessage, ChatResponse

__all__ = ["ScriptedChatClient"]


class ScriptedChatClient:
    """Answers each call with the next scripted reply; no network.

    A reply is a string (the answer's content) or an :class:`LLMError` to raise. Each
    call's arguments are appended to :attr:`calls`. Running out of replies raises
    :class:`LLMError` (reason ``script_exhausted``), so an unexpected call fails loudly.
    """

    def __init__(self, replies: Iterable[str | LLMError], *, model: str = "scripted") -> None:
        self.model = model
        self.calls: list[dict[str, Any]] = []
        self._replies: deque[str | LLMError] = deque(replies)
        self._lock = threading.Lock()

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        """Record the call and return (or raise) the next scripted reply."""
        with self._lock:
            self.calls.append(
                {
                    "messages": [dict(m) for m in messages],
                    "json_schema": json_schema,
                    "temperature": temperature,
                    "max_tokens": max_tokens,
                }
            )
            if not self._replies:
                raise LLMError("no scripted reply left", reason="script_exhausted")
            reply = self._replies.popleft()
        if isinstance(reply, LLMError):
            raise reply
        return ChatResponse(content=reply, model=self.model, finish_reason="stop")
