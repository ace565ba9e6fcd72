"""The session-state store: the rolling summary and the scratchpad of a session.

Both live in one JSON document per session (``session_state.state_json`` in SQLite,
under ``summary_state`` and ``scratchpad``); each write changes only its own key, so the
two never clobber each other. The feature modules (:mod:`mindfile.memory.summary`,
:mod:`mindfile.memory.scratchpad`) validate and serialise (``dump_json``); this store
reads decoded values and writes JSON text. Every method runs inside the caller's
transaction when one is open.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from mindfile.storage.db import Database

__all__ = ["SessionStateStore", "SqliteSessionStateStore"]


class SessionStateStore(Protocol):
    """What the summary and scratchpad features need from storage (backend-neutral)."""

    def read_summary(self, session_id: str) -> dict[str, Any] | None:
        """The stored summary state, or None if none was ever written."""
        ...

    def swap_summary(self, session_id: str, expected_epoch: int, state_json: str, now: str) -> bool:
        """Store ``state_json`` if the stored epoch (0 when missing) is ``expected_epoch``;
        True if it applied. With ``expected_epoch == 0`` the session's state document is
        created when missing (the session row must exist). One atomic compare-and-swap:
        of concurrent writers holding the same epoch, exactly one applies."""
        ...

    def summary_epoch(self, session_id: str) -> int:
        """The stored summary epoch (0 when there is none)."""
        ...

    def read_scratchpad(self, session_id: str) -> dict[str, Any] | None:
        """The stored scratchpad (``{"items", "updated_at"}``), or None."""
        ...

    def write_scratchpad(self, session_id: str, pad_json: str, now: str) -> None:
        """Replace the scratchpad (the session row must exist)."""
        ...

    def clear_scratchpad(self, session_id: str, now: str) -> bool:
        """Remove the scratchpad; True if there was one."""
        ...


READ_SUMMARY = """
SELECT json_extract(state_json, '$.summary_state') FROM session_state WHERE session_id = ?
"""

ENSURE_STATE = """
INSERT INTO session_state (session_id, state_json, updated_at) VALUES (?1, '{}', ?2)
ON CONFLICT (session_id) DO NOTHING
"""

COMPARE_AND_SWAP = """
UPDATE session_state
SET state_json = json_set(state_json, '$.summary_state', json(?3)), updated_at = ?4
WHERE session_id = ?1
  AND coalesce(json_extract(state_json, '$.summary_state.epoch'), 0) = ?2
"""

CURRENT_EPOCH = """
SELECT coalesce(json_extract(state_json, '$.summary_state.epoch'), 0)
FROM session_state WHERE session_id = ?
"""

READ_SCRATCHPAD = """
SELECT json_extract(state_json, '$.scratchpad') FROM session_state WHERE session_id = ?
"""

WRITE_SCRATCHPAD = """
INSERT INTO session_state (session_id, state_json, updated_at)
VALUES (?1, json_object('scratchpad', json(?2)), ?3)
ON CONFLICT (session_id) DO UPDATE SET
    state_json = json_set(session_state.state_json, '$.scratchpad', json(?2)),
    updated_at = ?3
"""

CLEAR_SCRATCHPAD = """
UPDATE session_state
SET state_json = json_remove(state_json, '$.scratchpad'), updated_at = ?2
WHERE session_id = ?1 AND json_type(state_json, '$.scratchpad') IS NOT NULL
"""


class SqliteSessionStateStore:
    """:class:`SessionStateStore` on the ``session_state`` table (JSON1 functions)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def read_summary(self, session_id: str) -> dict[str, Any] | None:
        return _decoded(self.db.scalar(READ_SUMMARY, (session_id,)))

    def swap_summary(self, session_id: str, expected_epoch: int, state_json: str, now: str) -> bool:
        with self.db.atomic():
            if expected_epoch == 0:
                self.db.execute(ENSURE_STATE, (session_id, now))
            self.db.execute(COMPARE_AND_SWAP, (session_id, expected_epoch, state_json, now))
            return self.db.changes() > 0

    def summary_epoch(self, session_id: str) -> int:
        return int(self.db.scalar(CURRENT_EPOCH, (session_id,)) or 0)

    def read_scratchpad(self, session_id: str) -> dict[str, Any] | None:
        return _decoded(self.db.scalar(READ_SCRATCHPAD, (session_id,)))

    def write_scratchpad(self, session_id: str, pad_json: str, now: str) -> None:
        self.db.execute(WRITE_SCRATCHPAD, (session_id, pad_json, now))

    def clear_scratchpad(self, session_id: str, now: str) -> bool:
        with self.db.atomic():
            self.db.execute(CLEAR_SCRATCHPAD, (session_id, now))
            return self.db.changes() > 0


def _decoded(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    data: dict[str, Any] = json.loads(raw)
    return data
