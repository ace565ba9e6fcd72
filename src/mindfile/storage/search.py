"""The search store: what the read path reads besides its derived indexes.

:mod:`mindfile.retrieve` ranks (fusion, degraded search, the time boost); this store
reads the rows those rules need: the embedding backlog, which candidates still lack a
vector, chunk times, and the chunk ids a read filter allows. The read path itself stays
on the :class:`~mindfile.storage.db.Database` (a read filter's extra condition is SQL on
``chunks AS c``; its full-text leg is :mod:`mindfile.storage.fulltext`;
docs/architecture.md, "Storage seam").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np
import numpy.typing as npt

from mindfile.storage import log
from mindfile.storage.db import Database
from mindfile.storage.fulltext import filter_clause

if TYPE_CHECKING:
    from mindfile.storage.postgres.db import PgDatabase

__all__ = ["SearchSql", "SearchStore", "SqlSearchStore", "SqliteSearchStore"]


class SearchStore(Protocol):
    """Reads of the search path (backend-neutral but for :meth:`rowids_where`, whose
    condition is SQL in the backend's dialect)."""

    def backlog(self, cap: int) -> tuple[int, int, int] | None:
        """``(pending, running, failed)`` embedding jobs, each counted up to ``cap``;
        None when there are none (the cheap check every search makes)."""
        ...

    def unembedded_among(self, rowids: Sequence[int]) -> list[int]:
        """Those of ``rowids`` that have no vector."""
        ...

    def chunk_times(self, rowids: Sequence[int]) -> list[tuple[int, str]]:
        """``(rowid, occurred_at or created_at)`` of the chunks that exist."""
        ...

    def chunk_statements(self, rowids: Sequence[int]) -> list[tuple[int, str, str]]:
        """``(rowid, chunk_text, metadata_json)`` of those chunks that exist, for the
        preference detector."""
        ...

    def chunk_authors(self, rowids: Sequence[int]) -> dict[int, str]:
        """``metadata["author"]`` of those chunks that have one (a string), by rowid
        (author match)."""
        ...

    def statement_rowids(self, after: int = 0) -> list[int]:
        """The rowids above ``after`` of the chunks classified as user-side statements
        about the user (``user_statement = 1``; migration 0014), ascending."""
        ...

    def has_unclassified(self) -> bool:
        """Whether any chunk is not classified yet (``user_statement`` NULL: written
        before migration 0014 and not backfilled)."""
        ...

    def unclassified_after(self, rowid: int, limit: int) -> list[tuple[int, str, str]]:
        """:meth:`chunk_statements` of the first ``limit`` unclassified chunks above
        ``rowid``, by rowid (the backfill's page)."""
        ...

    def first_unclassified(self) -> int | None:
        """The lowest rowid of an unclassified chunk, or None when every chunk is
        classified (flags below it are final)."""
        ...

    def unclassified_among(self, rowids: Sequence[int]) -> list[tuple[int, str, str]]:
        """:meth:`chunk_statements` of those of ``rowids`` not classified yet."""
        ...

    def statement_lexicon(self) -> int:
        """The version of the lexicon that classified the chunks (``store_meta`` key
        ``statement_lexicon``; absent: 1)."""
        ...

    def reset_statements(self, version: int) -> bool:
        """If the chunks were classified by a lexicon older than ``version``: mark them
        all unclassified and record ``version``, in one transaction; True if it did."""
        ...

    def classify_statements(self, flags: Sequence[tuple[int, bool]]) -> None:
        """Store ``(rowid, is a user statement)`` for those chunks still unclassified,
        in one short write transaction (the one write of this store: the backfill's;
        rows already classified, or deleted, are left alone)."""
        ...

    def token_sets(self, rowids: Sequence[int]) -> list[tuple[int, bytes | None, str | None]]:
        """``(rowid, token_set, chunk_text)`` of those chunks that exist: the stored set
        of word pieces (migration 0016), or None and the text to tokenise when it has
        none yet (token match)."""
        ...

    def untokenized_after(self, rowid: int, limit: int) -> list[tuple[int, str]]:
        """``(rowid, chunk_text)`` of the first ``limit`` chunks above ``rowid`` without
        a token set, by rowid (the backfill's page)."""
        ...

    def store_token_sets(self, sets: Sequence[tuple[int, bytes]]) -> None:
        """Store ``(rowid, token_set)`` for those chunks that have none yet, in one short
        write transaction (rows that have one, or were deleted, are left alone)."""
        ...

    def rowids_where(self, condition: str, params: Sequence[Any]) -> list[int]:
        """Rowids of the chunks matching a read filter's SQL condition (``" AND ..."``
        on ``chunks AS c``)."""
        ...

    def rowids_matching(
        self,
        session_ids: Sequence[str] | None,
        tags: Sequence[str] = (),
        condition: str | None = None,
        params: Sequence[Any] = (),
    ) -> npt.NDArray[np.int64]:
        """Rowids (ascending) of the chunks a read filter allows: of ``session_ids``
        (None: any; empty: none), carrying every tag of ``tags``, passing ``condition``
        (SQL on ``chunks AS c`` in this backend's dialect, e.g. the recall store's
        :meth:`~mindfile.storage.recall.RecallStore.scope_condition`, with ``params``)."""
        ...

    def chunk_rows(self, rowids: Sequence[int]) -> dict[int, tuple[Any, ...]]:
        """Search hits' columns by rowid, of the chunks that exist: ``(id, chunk_id,
        session_id, chunk_text, sequence_start, sequence_end, metadata_json,
        occurred_at or created_at)``."""
        ...

    def chunks_around(self, rowids: Sequence[int], window: int) -> list[tuple[int, int, str, int]]:
        """``(around, rowid, session_id, sequence_end)`` of every chunk whose
        ``sequence_end`` is within ``window`` of the chunk ``around`` (one of
        ``rowids``) in the same session, those chunks included (where they sit in
        their conversations: neighbour smoothing)."""
        ...

    def chunk_ends(self, rowids: Sequence[int]) -> dict[int, int]:
        """``sequence_end`` by rowid (ties go to the most recent chunk)."""
        ...

    def scoped_sessions(self, *, user_id: str | None, channel: str | None = None) -> list[str]:
        """The ids of the sessions of ``user_id`` (and of ``channel`` when given), sorted."""
        ...

    def source_sessions(self, *, files: bool) -> list[str]:
        """The sessions of synced folders (``files:...``), or all the others."""
        ...


# status IN (...) uses idx_jobs_status_next: three index probes, however many done jobs.
HAS_BACKLOG = """
SELECT EXISTS (SELECT 1 FROM memory_jobs WHERE status IN ('pending', 'running', 'failed'))
"""

BACKLOG = """
SELECT
    (SELECT count(*) FROM (SELECT 1 FROM memory_jobs WHERE status = 'pending' LIMIT ?1)),
    (SELECT count(*) FROM (SELECT 1 FROM memory_jobs WHERE status = 'running' LIMIT ?1)),
    (SELECT count(*) FROM (SELECT 1 FROM memory_jobs WHERE status = 'failed' LIMIT ?1))
"""

UNEMBEDDED_AMONG = """
SELECT value FROM json_each(?)
WHERE NOT EXISTS (SELECT 1 FROM chunks_vec WHERE chunk_rowid = value)
"""

TIMES = """
SELECT id, coalesce(occurred_at, created_at) FROM chunks
WHERE id IN (SELECT value FROM json_each(?))
"""

# The chunks ?1 (through the covering idx_chunks_position, migration 0015: the planner
# prefers the rowid, whose rows hold ~1 KB of text) and, for each, one range probe of
# idx_chunks_session_seq (it covers the three columns) for the turns within ?2 of it.
AROUND = """
SELECT l.id, c.id, c.session_id, c.sequence_end
FROM chunks AS l INDEXED BY idx_chunks_position
JOIN chunks AS c INDEXED BY idx_chunks_session_seq
  ON c.session_id = l.session_id
 AND c.sequence_end BETWEEN l.sequence_end - ?2 AND l.sequence_end + ?2
WHERE l.id IN (SELECT value FROM json_each(?1))
"""

STATEMENTS = """
SELECT id, chunk_text, metadata_json FROM chunks
WHERE id IN (SELECT value FROM json_each(?))
"""

# Index probes only (the partial index of migration 0018 holds both columns): the planner
# would rather read the rows by rowid, ~1 KB of text each.
AUTHORS = """
SELECT id, json_extract(metadata_json, '$.author') FROM chunks INDEXED BY idx_chunks_author
WHERE id IN (SELECT value FROM json_each(?)) AND json_type(metadata_json, '$.author') = 'text'
"""

# Both use a partial index of migration 0014: no scan of the chunks.
STATEMENT_ROWIDS = "SELECT id FROM chunks WHERE user_statement = 1 AND id > ? ORDER BY id"

HAS_UNCLASSIFIED = "SELECT EXISTS (SELECT 1 FROM chunks WHERE user_statement IS NULL)"

UNCLASSIFIED_AFTER = """
SELECT id, chunk_text, metadata_json FROM chunks
WHERE user_statement IS NULL AND id > ? ORDER BY id LIMIT ?
"""

FIRST_UNCLASSIFIED = "SELECT min(id) FROM chunks WHERE user_statement IS NULL"

UNCLASSIFIED_AMONG = """
SELECT id, chunk_text, metadata_json FROM chunks
WHERE id IN (SELECT value FROM json_each(?)) AND user_statement IS NULL
"""

LEXICON = "SELECT value FROM store_meta WHERE key = 'statement_lexicon'"

SET_LEXICON = "INSERT OR REPLACE INTO store_meta (key, value) VALUES ('statement_lexicon', ?)"

UNCLASSIFY_ALL = "UPDATE chunks SET user_statement = NULL WHERE user_statement IS NOT NULL"

# ?1: the rowids that are statements, ?2: every rowid classified (JSON arrays).
CLASSIFY = """
UPDATE chunks SET user_statement = (id IN (SELECT value FROM json_each(?1)))
WHERE id IN (SELECT value FROM json_each(?2)) AND user_statement IS NULL
"""

ROWIDS_WHERE = "SELECT c.id FROM chunks AS c WHERE 1{condition}"
# The same as one string ("1,5,9"): ~100k rowids in one row cost ~3x less than a row each.
ROWIDS_JOINED = "SELECT group_concat(c.id) FROM chunks AS c WHERE 1{condition}"

# The text only for the chunks without a set (to tokenise them in the search).
TOKEN_SETS = """
SELECT id, token_set, CASE WHEN token_set IS NULL THEN chunk_text END FROM chunks
WHERE id IN (SELECT value FROM json_each(?))
"""

# Uses the partial index of migration 0016: no scan of the chunks.
UNTOKENIZED_AFTER = """
SELECT id, chunk_text FROM chunks WHERE token_set IS NULL AND id > ? ORDER BY id LIMIT ?
"""

STORE_TOKEN_SET = "UPDATE chunks SET token_set = ? WHERE id = ? AND token_set IS NULL"


@dataclass(frozen=True, slots=True)
class SearchSql:
    """The SQL of the :class:`SearchStore` reads and writes both backends run alike
    (placeholders in the backend's style; an id list is one parameter, see
    :meth:`SqlSearchStore._ids`)."""

    unembedded_among: str
    times: str
    around: str
    statements: str
    authors: str
    statement_rowids: str
    has_unclassified: str
    unclassified_after: str
    first_unclassified: str
    unclassified_among: str
    lexicon: str
    set_lexicon: str
    unclassify_all: str
    classify: str
    rowids_where: str
    rowids_joined: str
    token_sets: str
    untokenized_after: str
    store_token_set: str
    #: Taken first in :meth:`SqlSearchStore.reset_statements` (Postgres: one resetter
    #: at a time), or None.
    reset_lock: str | None = None


class SqlSearchStore:
    """The :class:`SearchStore` methods that differ between backends only by their SQL
    (:attr:`SQL`), how an id list is passed (:meth:`_ids`) and the read filter's SQL
    (:meth:`_filter`): SQLite's and Postgres's stores derive from it."""

    SQL: ClassVar[SearchSql]
    db: Database | PgDatabase

    @staticmethod
    def _ids(rowids: Sequence[int]) -> object:
        """An id list as one parameter (SQLite: JSON text for ``json_each``)."""
        return json.dumps([int(r) for r in rowids])

    @staticmethod
    def _filter(
        session_ids: Sequence[str] | None,
        tags: Sequence[str],
        condition: str | None,
        params: Sequence[Any],
    ) -> tuple[str, list[Any]]:
        return filter_clause(session_ids, tags, condition, params)

    def unembedded_among(self, rowids: Sequence[int]) -> list[int]:
        return [int(r[0]) for r in self.db.query(self.SQL.unembedded_among, (self._ids(rowids),))]

    def chunk_times(self, rowids: Sequence[int]) -> list[tuple[int, str]]:
        rows = self.db.query(self.SQL.times, (self._ids(rowids),))
        return [(int(rowid), str(text)) for rowid, text in rows]

    def chunks_around(self, rowids: Sequence[int], window: int) -> list[tuple[int, int, str, int]]:
        if not rowids:
            return []
        rows = self.db.query(self.SQL.around, (self._ids(rowids), int(window)))
        return [(int(a), int(rowid), str(session), int(end)) for a, rowid, session, end in rows]

    def chunk_statements(self, rowids: Sequence[int]) -> list[tuple[int, str, str]]:
        return _texts(self.db.query(self.SQL.statements, (self._ids(rowids),)))

    def chunk_authors(self, rowids: Sequence[int]) -> dict[int, str]:
        if not rowids:
            return {}
        rows = self.db.query(self.SQL.authors, (self._ids(rowids),))
        return {int(rowid): str(author) for rowid, author in rows}

    def statement_rowids(self, after: int = 0) -> list[int]:
        return [int(r[0]) for r in self.db.query(self.SQL.statement_rowids, (after,))]

    def has_unclassified(self) -> bool:
        return bool(self.db.scalar(self.SQL.has_unclassified))

    def unclassified_after(self, rowid: int, limit: int) -> list[tuple[int, str, str]]:
        return _texts(self.db.query(self.SQL.unclassified_after, (rowid, limit)))

    def first_unclassified(self) -> int | None:
        found = self.db.scalar(self.SQL.first_unclassified)
        return None if found is None else int(found)

    def unclassified_among(self, rowids: Sequence[int]) -> list[tuple[int, str, str]]:
        return _texts(self.db.query(self.SQL.unclassified_among, (self._ids(rowids),)))

    def statement_lexicon(self) -> int:
        value = self.db.scalar(self.SQL.lexicon)
        return 1 if value is None else int(value)

    def reset_statements(self, version: int) -> bool:
        with self.db.atomic():
            if self.SQL.reset_lock is not None:
                self.db.execute(self.SQL.reset_lock)
            if self.statement_lexicon() >= version:
                return False
            self.db.execute(self.SQL.unclassify_all)
            self.db.execute(self.SQL.set_lexicon, (str(version),))
            return True

    def classify_statements(self, flags: Sequence[tuple[int, bool]]) -> None:
        if not flags:
            return
        yes = self._ids([r for r, flag in flags if flag])
        with self.db.atomic():
            self.db.execute(self.SQL.classify, (yes, self._ids([r for r, _ in flags])))

    def token_sets(self, rowids: Sequence[int]) -> list[tuple[int, bytes | None, str | None]]:
        if not rowids:
            return []
        rows = self.db.query(self.SQL.token_sets, (self._ids(rowids),))
        return [
            (int(r), None if blob is None else bytes(blob), None if text is None else str(text))
            for r, blob, text in rows
        ]

    def untokenized_after(self, rowid: int, limit: int) -> list[tuple[int, str]]:
        rows = self.db.query(self.SQL.untokenized_after, (rowid, limit))
        return [(int(r), str(text)) for r, text in rows]

    def store_token_sets(self, sets: Sequence[tuple[int, bytes]]) -> None:
        if not sets:
            return
        # In id order, as every writer of several chunk rows locks them (Postgres: no
        # deadlock with a statement backfill over the same rows).
        ordered = sorted((int(r), blob) for r, blob in sets)
        with self.db.atomic():
            self.db.executemany(self.SQL.store_token_set, [(blob, r) for r, blob in ordered])

    def rowids_where(self, condition: str, params: Sequence[Any]) -> list[int]:
        rows = self.db.query(self.SQL.rowids_where.format(condition=condition), list(params))
        return [int(r[0]) for r in rows]

    def rowids_matching(
        self,
        session_ids: Sequence[str] | None,
        tags: Sequence[str] = (),
        condition: str | None = None,
        params: Sequence[Any] = (),
    ) -> npt.NDArray[np.int64]:
        sql, all_params = self._filter(session_ids, tags, condition, params)
        row = self.db.query_one(self.SQL.rowids_joined.format(condition=sql), list(all_params))
        joined = None if row is None else row[0]
        if not joined:
            return np.zeros(0, dtype=np.int64)
        out = np.fromstring(str(joined), dtype=np.int64, sep=",")
        out.sort()
        return out


def _texts(rows: Sequence[Sequence[Any]]) -> list[tuple[int, str, str]]:
    return [(int(r), str(t), str(m)) for r, t, m in rows]


class SqliteSearchStore(SqlSearchStore):
    """:class:`SearchStore` on ``memory_jobs``, ``chunks`` and ``chunks_vec``."""

    SQL = SearchSql(
        unembedded_among=UNEMBEDDED_AMONG,
        times=TIMES,
        around=AROUND,
        statements=STATEMENTS,
        authors=AUTHORS,
        statement_rowids=STATEMENT_ROWIDS,
        has_unclassified=HAS_UNCLASSIFIED,
        unclassified_after=UNCLASSIFIED_AFTER,
        first_unclassified=FIRST_UNCLASSIFIED,
        unclassified_among=UNCLASSIFIED_AMONG,
        lexicon=LEXICON,
        set_lexicon=SET_LEXICON,
        unclassify_all=UNCLASSIFY_ALL,
        classify=CLASSIFY,
        rowids_where=ROWIDS_WHERE,
        rowids_joined=ROWIDS_JOINED,
        token_sets=TOKEN_SETS,
        untokenized_after=UNTOKENIZED_AFTER,
        store_token_set=STORE_TOKEN_SET,
    )
    db: Database

    def __init__(self, db: Database) -> None:
        self.db = db

    def backlog(self, cap: int) -> tuple[int, int, int] | None:
        if not self.db.scalar(HAS_BACKLOG):
            return None
        row = self.db.query_one(BACKLOG, (cap,))
        if row is None:
            return (0, 0, 0)
        pending, running, failed = (int(n) for n in row)
        return pending, running, failed

    def chunk_rows(self, rowids: Sequence[int]) -> dict[int, tuple[Any, ...]]:
        return log.chunk_rows(self.db, rowids)

    def chunk_ends(self, rowids: Sequence[int]) -> dict[int, int]:
        return log.chunk_ends(self.db, rowids)

    def scoped_sessions(self, *, user_id: str | None, channel: str | None = None) -> list[str]:
        return log.scoped_sessions(self.db, user_id=user_id, channel=channel)

    def source_sessions(self, *, files: bool) -> list[str]:
        return log.source_sessions(self.db, files=files)
