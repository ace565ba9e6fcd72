"""Token counting for budgets.

The default is a calibrated estimate, not a tokenizer: ``ceil(chars / 4)`` per text plus
4 tokens of per-message framing. It is what OpenAI documents as the rule of thumb for
English with its BPE tokenizers and costs ~100 ns per message. Pass your own counter
(e.g. ``lambda s: len(enc.encode(s))`` with tiktoken) wherever a ``token_counter`` is
accepted when budgets must be exact for a specific model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["MESSAGE_OVERHEAD", "TokenCounter", "estimate_tokens", "message_tokens"]

TokenCounter = Callable[[str], int]

MESSAGE_OVERHEAD = 4


def estimate_tokens(text: str) -> int:
    """About one token per four characters (at least one for non-empty text)."""
    return (len(text) + 3) // 4


def message_tokens(payload: Any, counter: TokenCounter = estimate_tokens) -> int:
    """Tokens a stored payload costs in a prompt, framing included."""
    if isinstance(payload, str):
        body = payload
    elif isinstance(payload, dict) and isinstance(payload.get("content"), str):
        body = payload["content"]
        if payload.get("tool_calls"):
            body += json.dumps(payload["tool_calls"], ensure_ascii=False)
    else:
        body = json.dumps(payload, ensure_ascii=False)
    if not callable(counter):
        from mindfile.errors import InvalidInputError

        raise InvalidInputError("token_counter must be a callable str -> int")
    tokens = counter(body)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        from mindfile.errors import InvalidInputError

        raise InvalidInputError("token_counter must return a non-negative integer")
    return tokens + MESSAGE_OVERHEAD
