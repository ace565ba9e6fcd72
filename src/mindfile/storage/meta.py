"""The meta store: the store's own settings, as text keys and values.

``store_meta`` holds what every process opening the file must agree on: the embedding
model the vectors were made with (``embedding_model``, ``embedding_dims``), the decay
policy (:mod:`mindfile.manage.expiry`), the derived indexes' identity. Values are text;
the feature that owns a key parses it. Every method runs inside the caller's
transaction when one is open.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Protocol

from mindfile.storage.db import Database

__all__ = ["DIMS_KEY", "MODEL_KEY", "MetaStore", "SqliteMetaStore"]

#: The model every vector was made with, and its dimensions (bound on first open).
MODEL_KEY = "embedding_model"
DIMS_KEY = "embedding_dims"


class MetaStore(Protocol):
    """Store-wide settings by key (backend-neutral)."""

    def get(self, key: str) -> str | None:
        """The value of ``key``, or None."""
        ...

    def get_many(self, keys: Iterable[str] | None = None) -> dict[str, str]:
        """The values of ``keys`` that are set (every key when None)."""
        ...

    def set(self, values: Mapping[str, str]) -> None:
        """Set (or replace) each key's value, in one transaction."""
        ...

    def set_default(self, values: Mapping[str, str]) -> None:
        """Set each key that is not set yet (a concurrent first writer wins)."""
        ...


SELECT_ONE = "SELECT value FROM store_meta WHERE key = ?"

SELECT_ALL = "SELECT key, value FROM store_meta"

SELECT_KEYS = "SELECT key, value FROM store_meta WHERE key IN (SELECT value FROM json_each(?))"

REPLACE = "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)"

INSERT_NEW = "INSERT OR IGNORE INTO store_meta (key, value) VALUES (?, ?)"


class SqliteMetaStore:
    """:class:`MetaStore` on ``store_meta``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, key: str) -> str | None:
        value = self.db.scalar(SELECT_ONE, (key,))
        return None if value is None else str(value)

    def get_many(self, keys: Iterable[str] | None = None) -> dict[str, str]:
        if keys is None:
            rows = self.db.query(SELECT_ALL)
        else:
            rows = self.db.query(SELECT_KEYS, (json.dumps(list(keys)),))
        return {str(k): str(v) for k, v in rows}

    def set(self, values: Mapping[str, str]) -> None:
        with self.db.atomic():
            self.db.executemany(REPLACE, list(values.items()))

    def set_default(self, values: Mapping[str, str]) -> None:
        with self.db.atomic():
            self.db.executemany(INSERT_NEW, list(values.items()))
