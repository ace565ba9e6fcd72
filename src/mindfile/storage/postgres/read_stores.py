"""Postgres implementations of the read path's stores: search and recall.

Same contracts as :mod:`mindfile.storage.search` and :mod:`mindfile.storage.recall`.
The read path (``retrieve/``, ``context/``) gets them for a :class:`PgDatabase` from
:mod:`mindfile.storage.backend`. Read filters are SQL conditions on ``chunks AS c`` in
the backend's dialect:
:func:`scope_where` is :meth:`mindfile.storage.recall.Scope.where` for Postgres, and
:meth:`PgSearchStore.rowids_where` takes conditions with psycopg placeholders.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mindfile.storage.postgres.db import PgDatabase
from mindfile.storage.recall import CandidateRow, Scope
from mindfile.storage.search import SearchSql, SqlSearchStore

__all__ = ["PgRecallStore", "PgSearchStore", "filter_clause", "scope_where"]

# -- search ------------------------------------------------------------------------------

HAS_BACKLOG = """
SELECT EXISTS (SELECT 1 FROM memory_jobs WHERE status IN ('pending', 'running', 'failed'))
"""

BACKLOG = """
SELECT
    (SELECT count(*) FROM (SELECT 1 FROM memory_jobs WHERE status = 'pending' LIMIT %(cap)s) p),
    (SELECT count(*) FROM (SELECT 1 FROM memory_jobs WHERE status = 'running' LIMIT %(cap)s) r),
    (SELECT count(*) FROM (SELECT 1 FROM memory_jobs WHERE status = 'failed' LIMIT %(cap)s) f)
"""

# In the order given, as SQLite's json_each yields them.
UNEMBEDDED_AMONG = """
SELECT u.r FROM unnest(%s::bigint[]) WITH ORDINALITY AS u(r, i)
WHERE NOT EXISTS (SELECT 1 FROM chunks_vec WHERE chunk_rowid = u.r)
ORDER BY u.i
"""

# Parameters in SQLite's order (ids, window), so the shared chunks_around runs it.
AROUND = """
SELECT l.id, c.id, c.session_id, c.sequence_end
FROM (SELECT %s::bigint[] AS ids, %s::bigint AS w) AS p
JOIN chunks AS l ON l.id = ANY(p.ids)
JOIN chunks AS c
  ON c.session_id = l.session_id
 AND c.sequence_end BETWEEN l.sequence_end - p.w AND l.sequence_end + p.w
"""

TIMES = """
SELECT id, coalesce(occurred_at, created_at) FROM chunks WHERE id = ANY(%s::bigint[]) ORDER BY id
"""

STATEMENTS = """
SELECT id, chunk_text, metadata_json FROM chunks WHERE id = ANY(%s::bigint[]) ORDER BY id
"""

AUTHORS = """
SELECT id, metadata_json::jsonb ->> 'author' FROM chunks
WHERE id = ANY(%s::bigint[]) AND jsonb_typeof(metadata_json::jsonb -> 'author') = 'string'
"""

# Both use a partial index of migration 0009: no scan of the chunks.
STATEMENT_ROWIDS = "SELECT id FROM chunks WHERE user_statement = 1 AND id > %s ORDER BY id"

HAS_UNCLASSIFIED = "SELECT EXISTS (SELECT 1 FROM chunks WHERE user_statement IS NULL)"

UNCLASSIFIED_AFTER = """
SELECT id, chunk_text, metadata_json FROM chunks
WHERE user_statement IS NULL AND id > %s ORDER BY id LIMIT %s
"""

FIRST_UNCLASSIFIED = "SELECT min(id) FROM chunks WHERE user_statement IS NULL"

UNCLASSIFIED_AMONG = """
SELECT id, chunk_text, metadata_json FROM chunks
WHERE id = ANY(%s::bigint[]) AND user_statement IS NULL
"""

LEXICON = "SELECT value FROM store_meta WHERE key = 'statement_lexicon'"

SET_LEXICON = """
INSERT INTO store_meta (key, value) VALUES ('statement_lexicon', %s)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
"""

# One resetter at a time (any fixed key: "mfstlex" in ASCII).
RESET_LOCK = "SELECT pg_advisory_xact_lock(30793418521994616)"

UNCLASSIFY_ALL = "UPDATE chunks SET user_statement = NULL WHERE user_statement IS NOT NULL"

# The rowids that are statements, then every rowid classified. No writer lock: the
# column is not one the derived indexes read (0008). The rows are locked in id order
# (``FOR UPDATE`` in an ordered subquery): two backfills (or a backfill and the token
# sets, also written in id order) locking the same rows in the plan's order deadlocked
# (a rare failure of the thread-stress test on Postgres).
CLASSIFY = """
UPDATE chunks SET user_statement = CASE WHEN id = ANY(%s::bigint[]) THEN 1 ELSE 0 END
WHERE id IN (
    SELECT id FROM chunks WHERE id = ANY(%s::bigint[]) AND user_statement IS NULL
    ORDER BY id FOR UPDATE
)
"""

ROWIDS_WHERE = "SELECT c.id FROM chunks AS c WHERE true{condition}"
ROWIDS_JOINED = "SELECT string_agg(c.id::text, ',') FROM chunks AS c WHERE true{condition}"

TOKEN_SETS = """
SELECT id, token_set, CASE WHEN token_set IS NULL THEN chunk_text END FROM chunks
WHERE id = ANY(%s::bigint[])
"""

# Uses the partial index of migration 0010: no scan of the chunks.
UNTOKENIZED_AFTER = """
SELECT id, chunk_text FROM chunks WHERE token_set IS NULL AND id > %s ORDER BY id LIMIT %s
"""

# No writer lock: the column is not one the derived indexes read (0008).
STORE_TOKEN_SET = "UPDATE chunks SET token_set = %s WHERE id = %s AND token_set IS NULL"

HIT_ROWS = """
SELECT id, chunk_id, session_id, chunk_text, sequence_start, sequence_end, metadata_json,
       coalesce(occurred_at, created_at)
FROM chunks WHERE id = ANY(%s::bigint[])
"""

ENDS = "SELECT id, sequence_end FROM chunks WHERE id = ANY(%s::bigint[])"

SOURCE_SESSIONS = "SELECT session_id FROM sessions WHERE session_id {op} %s"

# Every tag in the chunk's metadata tags (a JSON array), as SQLite's json_each test.
TAG = " AND (c.metadata_json::jsonb -> 'tags') @> jsonb_build_array(%s::text)"


def filter_clause(
    session_ids: Sequence[str] | None,
    tags: Sequence[str] = (),
    condition: str | None = None,
    params: Sequence[Any] = (),
) -> tuple[str, list[Any]]:
    """A read filter as ``" AND ..."`` on ``chunks AS c`` in Postgres terms, and its
    parameters (:func:`mindfile.storage.fulltext.filter_clause`'s rules; ``condition``
    must already be Postgres SQL, e.g. :func:`scope_where`'s)."""
    if session_ids is not None and not session_ids:
        return " AND false", []
    sql, out = "", list[Any]()
    if session_ids is not None:
        sql += " AND c.session_id = ANY(%s::text[])"
        out.append(list(session_ids))
    sql += "".join(TAG for _ in tags)
    out += list(tags)
    if condition:
        sql += f" AND ({condition})"
    return sql, [*out, *params]


class PgSearchStore(SqlSearchStore):
    """:class:`~mindfile.storage.search.SearchStore` on Postgres."""

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
        reset_lock=RESET_LOCK,
    )
    db: PgDatabase

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    @staticmethod
    def _ids(rowids: Sequence[int]) -> object:
        return [int(r) for r in rowids]  # a bigint[] parameter

    @staticmethod
    def _filter(
        session_ids: Sequence[str] | None,
        tags: Sequence[str],
        condition: str | None,
        params: Sequence[Any],
    ) -> tuple[str, list[Any]]:
        return filter_clause(session_ids, tags, condition, params)

    def backlog(self, cap: int) -> tuple[int, int, int] | None:
        if not self.db.scalar(HAS_BACKLOG):
            return None
        row = self.db.query_one(BACKLOG, {"cap": cap})
        if row is None:
            return (0, 0, 0)
        pending, running, failed = (int(n) for n in row)
        return pending, running, failed

    def chunk_rows(self, rowids: Sequence[int]) -> dict[int, tuple[Any, ...]]:
        if not rowids:
            return {}
        rows = self.db.query(HIT_ROWS, ([int(r) for r in rowids],))
        return {int(r[0]): r for r in rows}

    def chunk_ends(self, rowids: Sequence[int]) -> dict[int, int]:
        if not rowids:
            return {}
        rows = self.db.query(ENDS, ([int(r) for r in rowids],))
        return {int(r): int(e) for r, e in rows}

    def scoped_sessions(self, *, user_id: str | None, channel: str | None = None) -> list[str]:
        if user_id is None and channel is None:
            raise ValueError("scoped_sessions needs a user_id or a channel")
        sql, params = "SELECT session_id FROM sessions WHERE true", []
        if user_id is not None:
            sql += " AND user_id = %s"
            params.append(user_id)
        if channel is not None:
            sql += " AND channel = %s"
            params.append(channel)
        return [str(r[0]) for r in self.db.query(sql + " ORDER BY session_id", params)]

    def source_sessions(self, *, files: bool) -> list[str]:
        sql = SOURCE_SESSIONS.format(op="LIKE" if files else "NOT LIKE")
        return [str(r[0]) for r in self.db.query(sql, ("files:%",))]


# -- recall ------------------------------------------------------------------------------


def scope_where(scope: Scope, *, lookback: bool = True) -> tuple[str, list[Any]]:
    """A condition on ``chunks AS c`` selecting what ``scope`` may recall, in Postgres
    terms, and its parameters (the rules of :meth:`~mindfile.storage.recall.Scope.where`)."""
    cutoff = scope.cutoff if lookback else None
    current = "c.session_id = %s"
    params: list[Any] = [scope.now, scope.session_id]
    if scope.recent_from is not None:
        current += " AND c.sequence_end < %s"
        params.append(scope.recent_from)
    if cutoff is not None:
        current += " AND c.created_at >= %s"
        params.append(cutoff)
    parts = [f"({current})"]
    others = _other_sessions(scope)
    if others is not None:
        sessions_sql, sessions_params = others
        other = f"c.session_id IN ({sessions_sql})"
        params += sessions_params
        if cutoff is not None:
            other += " AND c.created_at >= %s"
            params.append(cutoff)
        if scope.channel is not None:
            other += (
                " AND (c.session_id IN (SELECT session_id FROM sessions WHERE channel = %s)"
                " OR (c.session_id IN (SELECT session_id FROM sessions WHERE channel IS NULL)"
                " AND (c.metadata_json::jsonb ->> 'channel') = %s))"
            )
            params += [scope.channel, scope.channel]
        parts.append(f"({other})")
    if scope.namespaces:
        parts.append("c.session_id = ANY(%s::text[])")
        params.append(list(scope.namespaces))
    if scope.include_files:
        parts.append("c.file_id IS NOT NULL")
    alive = "(c.expires_at IS NULL OR c.expires_at > %s OR c.pinned = 1)"
    return f"{alive} AND ({' OR '.join(parts)})", params


def _other_sessions(scope: Scope) -> tuple[str, list[Any]] | None:
    if not scope.cross_session:
        return None
    sql = "SELECT session_id FROM sessions WHERE session_id <> %s"
    params: list[Any] = [scope.session_id]
    if scope.user_id is not None:
        sql += " AND user_id = %s"
        params.append(scope.user_id)
    elif scope.agent_identity is not None:
        sql += " AND user_id IS NULL"
    else:
        return None  # no user, no agent: nothing to cross into
    if scope.agent_identity is not None:
        sql += " AND agent_identity = %s"
        params.append(scope.agent_identity)
    return sql, params


SESSION_OF = "SELECT agent_identity, user_id FROM sessions WHERE session_id = %s"

SALIENT = """
SELECT c.id FROM chunks AS c WHERE {where} AND (c.pinned = 1 OR c.importance >= %s)
ORDER BY c.pinned DESC, c.importance DESC, c.created_at DESC, c.id DESC LIMIT %s
"""

CHUNKS = """
SELECT c.id, c.chunk_id, c.session_id, c.chunk_text, c.sequence_end, c.metadata_json,
       c.created_at, c.content_hash, c.importance, c.pinned, v.embedding,
       coalesce(c.last_accessed_at, c.created_at), coalesce(c.occurred_at, c.created_at)
FROM chunks AS c LEFT JOIN chunks_vec AS v ON v.chunk_rowid = c.id
WHERE c.id = ANY(%s::bigint[])
ORDER BY c.id
"""


def _blob(value: object) -> bytes:
    to_numpy = getattr(value, "to_numpy", None)
    raw = to_numpy() if callable(to_numpy) else value
    return np.asarray(raw, dtype="<f4").tobytes()


class PgRecallStore:
    """:class:`~mindfile.storage.recall.RecallStore` on Postgres."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def session_owner(self, session_id: str) -> tuple[str | None, str | None] | None:
        row = self.db.query_one(SESSION_OF, (session_id,))
        if row is None:
            return None
        agent, user = row
        return (None if agent is None else str(agent)), (None if user is None else str(user))

    def scope_condition(self, scope: Scope, *, lookback: bool = True) -> tuple[str, list[Any]]:
        return scope_where(scope, lookback=lookback)

    def salient(self, scope: Scope, threshold: float, limit: int) -> list[int]:
        where, params = scope_where(scope, lookback=False)
        rows = self.db.query(SALIENT.format(where=where), [*params, threshold, limit])
        return [int(r[0]) for r in rows]

    def candidates(self, rowids: Sequence[int]) -> list[CandidateRow]:
        out = []
        for row in self.db.query(CHUNKS, (sorted(int(r) for r in rowids),)):
            rowid, chunk_id, session_id, text, seq_end, meta, created = row[:7]
            chash, importance, pinned, vector, last_used, occurred = row[7:]
            out.append(
                CandidateRow(
                    rowid=int(rowid),
                    chunk_id=str(chunk_id),
                    session_id=str(session_id),
                    text=str(text),
                    sequence_end=int(seq_end),
                    metadata_json=str(meta),
                    created_at=str(created),
                    content_hash=str(chash),
                    importance=float(importance),
                    pinned=bool(pinned),
                    vector=None if vector is None else _blob(vector),
                    last_used=str(last_used),
                    occurred_at=str(occurred),
                )
            )
        return out
