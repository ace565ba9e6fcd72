"""The working-memory scratchpad: a short list of strings per session.

Stored in ``session_state.state_json`` under ``scratchpad`` as ``{"items": [...],
"updated_at": ...}`` with ``json_set``, so the core's ``last_sequence`` and the rolling
summary that share the row are never clobbered. A write replaces the whole pad. Items
are trimmed; an empty item, more than 32 items or an item over 240 characters is an
error and the stored pad is left as it was. Writing to a session that does not exist
yet creates its (empty) session row, so an agent can take notes before the first
message is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mindfile.errors import InvalidInputError, LimitExceededError
from mindfile.index.pipeline import check_id, dump_json
from mindfile.memory._write import check_text
from mindfile.memory.types import ScratchpadState
from mindfile.storage.db import utcnow

if TYPE_CHECKING:
    from mindfile._deps import StoreDeps

__all__ = [
    "MAX_SCRATCHPAD_ITEMS",
    "MAX_SCRATCHPAD_ITEM_CHARS",
    "check_scratchpad_items",
    "clear_scratchpad",
    "read_scratchpad",
    "write_scratchpad",
]

MAX_SCRATCHPAD_ITEMS = 32
MAX_SCRATCHPAD_ITEM_CHARS = 240


def check_scratchpad_items(items: Any) -> list[str]:
    """Validated, trimmed items, or :class:`InvalidInputError`/:class:`LimitExceededError`."""
    if isinstance(items, str) or not isinstance(items, Sequence):
        raise InvalidInputError("scratchpad items must be a list of strings")
    if len(items) > MAX_SCRATCHPAD_ITEMS:
        raise LimitExceededError(
            f"the scratchpad holds at most {MAX_SCRATCHPAD_ITEMS} items (got {len(items)})"
        )
    out: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidInputError(f"scratchpad item {i} must be a string")
        text = item.strip()
        if not text:
            raise InvalidInputError(f"scratchpad item {i} is empty")
        if len(text) > MAX_SCRATCHPAD_ITEM_CHARS:
            raise LimitExceededError(
                f"scratchpad item {i} is {len(text)} characters; the limit is "
                f"{MAX_SCRATCHPAD_ITEM_CHARS}"
            )
        out.append(check_text(text, f"scratchpad item {i}"))
    return out


def read_scratchpad(engine: StoreDeps, session_id: str) -> ScratchpadState | None:
    """The session's scratchpad, or None if it was never written (or was cleared)."""
    check_id(session_id, "session_id")
    data = engine.stores.session_state.read_scratchpad(session_id)
    if data is None:
        return None
    return ScratchpadState(session_id, tuple(data.get("items", ())), str(data.get("updated_at")))


def write_scratchpad(engine: StoreDeps, session_id: str, items: Sequence[str]) -> ScratchpadState:
    """Replace the whole scratchpad with ``items``."""
    check_id(session_id, "session_id")
    clean = check_scratchpad_items(items)
    now = utcnow()
    pad = dump_json({"items": clean, "updated_at": now}, "scratchpad")
    with engine.db.atomic():
        engine.stores.sessions.upsert(session_id, now)
        engine.stores.session_state.write_scratchpad(session_id, pad, now)
    return ScratchpadState(session_id, tuple(clean), now)


def clear_scratchpad(engine: StoreDeps, session_id: str) -> bool:
    """Remove the scratchpad; True if there was one."""
    check_id(session_id, "session_id")
    return engine.stores.session_state.clear_scratchpad(session_id, utcnow())
