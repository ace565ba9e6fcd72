"""Greedy packing of ranked search hits into a token budget (the benchmark's packer).

Policy: **skip and continue**. Hits are taken in rank order while they fit; a hit that
does not fit is skipped and smaller hits further down may still be taken. Under a fixed
budget this retrieves more evidence than stopping at the first misfit (one long chunk
no longer hides every shorter one after it), at the price of the packed list not being
a prefix of the ranking. Each hit costs ``token_counter(hit.text) + overhead`` (the
per-item framing, 4 tokens by default like a chat message's).
"""

from __future__ import annotations

from collections.abc import Iterable

from mindfile.errors import InvalidInputError
from mindfile.tokens import MESSAGE_OVERHEAD, TokenCounter, estimate_tokens
from mindfile.types import SearchHit

__all__ = ["HIT_OVERHEAD", "pack_hits"]

#: Tokens of framing counted per packed hit (a bullet, a separator, provenance...).
HIT_OVERHEAD = MESSAGE_OVERHEAD


def pack_hits(
    hits: Iterable[SearchHit],
    token_budget: int,
    *,
    token_counter: TokenCounter = estimate_tokens,
    overhead: int = HIT_OVERHEAD,
) -> list[SearchHit]:
    """The hits, in their given order, that fit in ``token_budget`` (skip and continue).

    The total ``sum(token_counter(h.text) + overhead)`` of the result is never above
    ``token_budget``.
    """
    if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 0:
        raise InvalidInputError("token_budget must be a non-negative integer")
    if isinstance(overhead, bool) or not isinstance(overhead, int) or overhead < 0:
        raise InvalidInputError("overhead must be a non-negative integer")
    if not callable(token_counter):
        raise InvalidInputError("token_counter must be a callable str -> int")
    kept: list[SearchHit] = []
    used = 0
    for hit in hits:
        cost = int(token_counter(hit.text)) + overhead
        if used + cost <= token_budget:
            kept.append(hit)
            used += cost
    return kept
