"""The tests' own SQL on either backend (tests/conftest.py, "Both backends").

Tests read rows straight from the store to check what the API does not show. They are
written with SQLite's ``?`` placeholders; :func:`raw` runs them on a Postgres store too
(``?`` becomes ``%s``, a literal ``%`` is doubled, ``json_extract(col, '$.key')``
becomes ``col::jsonb ->> 'key'``). Other dialect differences (``PRAGMA``, FTS5 tables)
are not translated: such tests are SQLite-only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import mindfile
from mindfile.storage.db import Database

#: ``json_extract(column, '$.key')`` (a top-level key; its text on Postgres).
_JSON_EXTRACT = re.compile(r"json_extract\(([\w.]+), '\$\.(\w+)'\)")


def is_postgres(mem: mindfile.Mindfile) -> bool:
    """Whether ``mem`` runs on Postgres."""
    return not isinstance(mem.db, Database)


class Sql:
    """``query``/``query_one``/``scalar``/``execute``/``atomic`` on a store's database."""

    def __init__(self, mem: mindfile.Mindfile) -> None:
        self.db: Any = mem.db
        self.postgres = is_postgres(mem)

    def _text(self, text: str) -> str:
        if not self.postgres:
            return text
        text = _JSON_EXTRACT.sub(r"(\1::jsonb ->> '\2')", text)
        return text.replace("%", "%%").replace("?", "%s")

    def query(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.db.query(self._text(text), list(params))]

    def query_one(self, text: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        rows = self.query(text, params)
        return rows[0] if rows else None

    def scalar(self, text: str, params: Sequence[Any] = ()) -> Any:
        row = self.query_one(text, params)
        return None if row is None else row[0]

    def execute(self, text: str, params: Sequence[Any] = ()) -> None:
        self.db.execute(self._text(text), list(params))

    def atomic(self) -> Any:
        """The database's transaction (statements above run inside it)."""
        return self.db.atomic()


def raw(mem: mindfile.Mindfile) -> Sql:
    """The store's database for a test's own SQL (see the module docstring)."""
    return Sql(mem)
