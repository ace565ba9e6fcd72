"""The full-text store: BM25 ranking by the database itself, and the read filters.

The read path ranks with its own BM25 index (:mod:`mindfile.retrieve.lexical`) once it
is built; before that, while it catches up a bulk ingest, and wherever it is off, it
asks the database (SQLite: FTS5's ``bm25()`` over ``chunks_fts``). This store is that
question: the query's words (already analysed by :func:`mindfile.retrieve.fts.query_words`)
in, ``(chunk id, score)`` out, within a read filter (sessions, tags, and the context
builder's extra condition).

On SQLite the words become a safe FTS5 MATCH expression (each word quoted, OR-ed: user
text is never FTS5 syntax) and the filter becomes SQL conditions on ``chunks AS c``.
The filter's ``condition`` is already SQL (the context builder's scope,
:meth:`mindfile.storage.recall.Scope.where`): it is passed through as it is, the one
part of a read filter that is not backend-neutral yet (docs/architecture.md, "Storage
seam").
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from mindfile.storage.db import Database

if TYPE_CHECKING:
    from mindfile.storage.postgres.db import PgDatabase

__all__ = [
    "FullTextStore",
    "SqliteFullTextStore",
    "filter_clause",
    "full_text",
    "match_expression",
    "session_clause",
    "tag_clause",
]


class FullTextStore(Protocol):
    """BM25 over chunk text and its context columns, by the database."""

    def search(
        self,
        words: Sequence[str],
        limit: int,
        *,
        weights: tuple[float, float, float],
        session_ids: Sequence[str] | None = None,
        tags: Sequence[str] = (),
        condition: str | None = None,
        params: Sequence[Any] = (),
        after: int = 0,
    ) -> list[tuple[int, float]]:
        """``(chunk id, score)`` best first (higher is better; ties to the higher id) of
        the chunks holding any of ``words``, at most ``limit``. ``weights`` weigh the
        chunk text and its before/after context. Only chunks of ``session_ids`` (None:
        any; empty: none), carrying every tag of ``tags`` and passing ``condition`` (SQL
        on ``chunks AS c`` with ``params``, see the module docstring), and with an id
        above ``after``."""
        ...


def match_expression(words: Sequence[str]) -> str | None:
    """A safe FTS5 MATCH expression: each word quoted, OR-ed; None without words."""
    return " OR ".join(f'"{w}"' for w in words) if words else None


def tag_clause(tags: Sequence[str], alias: str = "c") -> tuple[str, list[str]]:
    """SQL requiring every tag in ``{alias}.metadata_json -> tags``."""
    sql = "".join(
        f" AND EXISTS (SELECT 1 FROM json_each({alias}.metadata_json, '$.tags') WHERE value = ?)"
        for _ in tags
    )
    return sql, list(tags)


def session_clause(session_ids: Sequence[str] | None, alias: str = "c") -> tuple[str, list[str]]:
    """SQL restricting ``{alias}.session_id`` to ``session_ids`` (none = no restriction)."""
    if session_ids is None:
        return "", []
    if len(session_ids) == 1:
        return f" AND {alias}.session_id = ?", list(session_ids)
    marks = ",".join("?" * len(session_ids))
    return f" AND {alias}.session_id IN ({marks})", list(session_ids)


def filter_clause(
    session_ids: Sequence[str] | None,
    tags: Sequence[str] = (),
    condition: str | None = None,
    params: Sequence[Any] = (),
) -> tuple[str, list[Any]]:
    """A read filter as ``" AND ..."`` SQL on ``chunks AS c``, and its parameters (an
    empty ``session_ids`` allows nothing)."""
    if session_ids is not None and not session_ids:
        return " AND 0", []
    s_sql, s_params = session_clause(session_ids)
    t_sql, t_params = tag_clause(tags)
    c_sql = f" AND ({condition})" if condition else ""
    return s_sql + t_sql + c_sql, [*s_params, *t_params, *params]


_BM25 = "bm25(chunks_fts, ?, ?, ?)"

SEARCH = (
    f"SELECT c.id, -{_BM25} AS score FROM chunks_fts "
    "JOIN chunks AS c ON c.id = chunks_fts.rowid "
    "WHERE chunks_fts MATCH ?{where} ORDER BY score DESC, c.id DESC LIMIT ?"
)
#: The same without a filter on the chunks: the FTS5 table holds exactly the chunks'
#: rows (its triggers write it in the chunk's transaction), so its rowids are the chunk
#: ids and the join only cost a lookup per matching row (the newest 4,000 chunks of a
#: 117k store, as a search ranks them after a bulk ingest: p50 3.6 -> 2.4 ms;
#: benchmarks/README.md). ``bm25()`` is computed once a row in both: the order is by
#: the selected score.
SEARCH_BARE = (
    f"SELECT rowid, -{_BM25} AS score FROM chunks_fts "
    "WHERE chunks_fts MATCH ?{where} ORDER BY score DESC, rowid DESC LIMIT ?"
)


class SqliteFullTextStore:
    """:class:`FullTextStore` on the FTS5 table ``chunks_fts`` (migration 0001)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def search(
        self,
        words: Sequence[str],
        limit: int,
        *,
        weights: tuple[float, float, float],
        session_ids: Sequence[str] | None = None,
        tags: Sequence[str] = (),
        condition: str | None = None,
        params: Sequence[Any] = (),
        after: int = 0,
    ) -> list[tuple[int, float]]:
        where, where_params = filter_clause(session_ids, tags, condition, params)
        bare = not where
        if after > 0:  # on the FTS5 table's rowid: FTS5 seeks past it in each doclist
            where, where_params = " AND chunks_fts.rowid > ?" + where, [after, *where_params]
        return self.search_where(words, limit, where, where_params, weights=weights, bare=bare)

    def search_where(
        self,
        words: Sequence[str],
        limit: int,
        where: str = "",
        params: Sequence[object] = (),
        *,
        weights: tuple[float, float, float],
        bare: bool = False,
    ) -> list[tuple[int, float]]:
        """:meth:`search` with the filter already SQL (``" AND ..."`` on ``chunks AS c``;
        ``bare``: it names only ``chunks_fts``, so the chunks need not be joined)."""
        match = match_expression(words)
        if match is None or limit <= 0:
            return []
        sql = SEARCH_BARE if bare else SEARCH
        rows = self.db.query(sql.format(where=where), [*weights, match, *params, limit])
        return [(int(r), float(s)) for r, s in rows]


def full_text(db: Database | PgDatabase) -> FullTextStore:
    """The full-text store over ``db``: the Postgres one for a ``PgDatabase`` (its
    ``condition`` is Postgres SQL), else SQLite's.

    The Postgres module is imported only for a Postgres database. A ``PgDatabase`` can
    only exist once its module is loaded, so looking in ``sys.modules`` decides without
    importing psycopg (the core install has none)."""
    pg = sys.modules.get("mindfile.storage.postgres.db")
    if pg is not None and isinstance(db, pg.PgDatabase):
        from mindfile.storage.postgres.fulltext import PgFullTextStore

        return PgFullTextStore(db)
    return SqliteFullTextStore(cast(Database, db))
