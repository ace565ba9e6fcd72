"""The privacy store: forgetting a session or a user, and purging what deletes leave.

What is erased and why a purge is needed are documented with the SQLite implementation
(:mod:`mindfile.storage.erase`) and in docs/privacy.md; the engine (``forget``,
``forget_user``, ``purge``, ``close``) reaches them through this store. ``purge`` must
run outside a transaction; the others inside the caller's.
"""

from __future__ import annotations

from typing import Protocol

from mindfile.storage import erase, log
from mindfile.storage.db import Database

__all__ = ["PrivacyStore", "SqlitePrivacyStore"]


class PrivacyStore(Protocol):
    """Erasing and purging (backend-neutral)."""

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and everything hanging off it; True if it existed."""
        ...

    def erase_facts_scope(self, scope: str) -> int:
        """Delete the facts of ``scope`` and their history; rows deleted."""
        ...

    def user_sessions(self, user_id: str) -> list[str]:
        """The sessions :meth:`erase_user` erases: the user's, ``memory:{user}`` and
        ``facts:{user}``."""
        ...

    def erase_user(self, user_id: str) -> dict[str, int]:
        """Delete every row holding the user's data; counts by kind."""
        ...

    def purge_pending(self) -> bool:
        """Whether a chunk was deleted since the last :meth:`purge`."""
        ...

    def purge(self) -> int:
        """Drop what deleted rows leave behind (index segments, logs, cached vectors of
        texts no longer stored); returns the cached vectors dropped."""
        ...


class SqlitePrivacyStore:
    """:class:`PrivacyStore` over :mod:`mindfile.storage.erase`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def delete_session(self, session_id: str) -> bool:
        with self.db.lock:  # changes() must be this statement's
            return log.delete_session(self.db, session_id)

    def erase_facts_scope(self, scope: str) -> int:
        with self.db.atomic():
            return erase.erase_facts_scope(self.db, scope)

    def user_sessions(self, user_id: str) -> list[str]:
        return erase.user_sessions(self.db, user_id)

    def erase_user(self, user_id: str) -> dict[str, int]:
        with self.db.atomic():
            return erase.erase_user(self.db, user_id)

    def purge_pending(self) -> bool:
        return erase.purge_pending(self.db)

    def purge(self) -> int:
        return erase.purge(self.db)
