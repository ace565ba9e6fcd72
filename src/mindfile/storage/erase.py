"""Erasing a user, and purging what deleted rows leave behind (docs/privacy.md).

**Erase.** :func:`erase_user` deletes, in the caller's transaction, every row that holds
a user's data: their sessions (``sessions.user_id``, plus the ``memory:{user}`` and
``facts:{user}`` namespaces) and by cascade the events, chunks, vectors, FTS rows,
jobs, session state (scratchpad, rolling summary), notes and consolidation records;
the facts of scope ``{user}`` and their history; the user's schedules and their runs;
logged LLM failures of the user or their sessions; quota settings of the user's
scopes.

**Purge.** ``PRAGMA secure_delete=ON`` (set on every connection) zeroes deleted cells
and freed pages, but two copies can outlive a delete: FTS5 keeps a deleted chunk's
terms in its index segments (a delete only adds a tombstone) until the segments are
merged, and the WAL keeps old page images until it is checkpointed and truncated.
:func:`purge` merges the FTS5 index into one segment (``optimize``: time linear in the
index size, measured in benchmarks/README.md) and truncates the WAL. Any delete of a
chunk sets the ``purge_pending`` flag (a trigger, migration 0011); the engine purges on
close when the flag is set, and ``Mindfile.purge()`` / ``forget_user`` purge at once.
"""

from __future__ import annotations

import json

from mindfile.storage import embedding_cache
from mindfile.storage.db import Database

__all__ = ["erase_facts_scope", "erase_user", "purge", "purge_pending", "user_sessions"]

USER_SESSIONS = """
SELECT session_id FROM sessions
WHERE user_id = ?1 OR session_id = 'memory:' || ?1 OR session_id = 'facts:' || ?1
"""

_IN_SESSIONS = "(SELECT value FROM json_each(?))"


def user_sessions(db: Database, user_id: str) -> list[str]:
    """The sessions :func:`erase_user` erases: the user's, ``memory:{user}``, ``facts:{user}``."""
    return [str(r[0]) for r in db.query(USER_SESSIONS, (user_id,))]


def erase_user(db: Database, user_id: str) -> dict[str, int]:
    """Delete everything of ``user_id`` (see the module docstring); counts by kind.

    Must run inside ``db.atomic()``.
    """
    sessions = user_sessions(db, user_id)
    ids = _json(sessions)
    counts: dict[str, int] = {"sessions": len(sessions)}
    counts["events"] = _count(
        db, f"SELECT count(*) FROM conversation_events WHERE session_id IN {_IN_SESSIONS}", ids
    )
    counts["chunks"] = _count(
        db, f"SELECT count(*) FROM chunks WHERE session_id IN {_IN_SESSIONS}", ids
    )
    counts["notes"] = _count(
        db, f"SELECT count(*) FROM notes WHERE session_id IN {_IN_SESSIONS}", ids
    )
    counts["llm_failures"] = _delete(
        db,
        "DELETE FROM llm_failures WHERE scope = ?1 OR session_id IN "
        "(SELECT value FROM json_each(?2))",
        (user_id, ids),
    )
    counts["quotas"] = _delete(
        db,
        "DELETE FROM quotas WHERE scope = 'user:' || ?1 OR scope IN "
        "(SELECT 'session:' || value FROM json_each(?2))",
        (user_id, ids),
    )
    db.execute(f"DELETE FROM sessions WHERE session_id IN {_IN_SESSIONS}", (ids,))
    counts["facts"] = _delete(db, "DELETE FROM facts WHERE scope = ?", (user_id,))
    counts["fact_history"] = _delete(db, "DELETE FROM fact_history WHERE scope = ?", (user_id,))
    counts["schedule_runs"] = _count(
        db,
        "SELECT count(*) FROM schedule_runs WHERE schedule_id IN "
        "(SELECT schedule_id FROM schedules WHERE user_id = ?)",
        user_id,
    )
    db.execute(
        "DELETE FROM schedule_runs WHERE schedule_id IN "
        "(SELECT schedule_id FROM schedules WHERE user_id = ?)",
        (user_id,),
    )
    counts["schedules"] = _delete(db, "DELETE FROM schedules WHERE user_id = ?", (user_id,))
    return counts


def erase_facts_scope(db: Database, scope: str) -> int:
    """Delete the facts of ``scope`` and their history (forgetting ``facts:{scope}``)."""
    n = _delete(db, "DELETE FROM facts WHERE scope = ?", (scope,))
    return n + _delete(db, "DELETE FROM fact_history WHERE scope = ?", (scope,))


def purge_pending(db: Database) -> bool:
    """Whether a chunk was deleted since the last :func:`purge`."""
    return db.scalar("SELECT 1 FROM store_meta WHERE key = 'purge_pending'") is not None


def purge(db: Database) -> int:
    """Merge FTS5 segments (dropping deleted rows' terms), drop cached vectors of texts
    no longer stored, and truncate the WAL.

    Must run outside a transaction (the checkpoint cannot run inside one). Returns how
    many cached vectors were dropped.
    """
    with db.atomic():
        db.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('optimize')")
        # Cached vectors of texts no chunk holds any more (mindfile.index.cache).
        dropped = embedding_cache.prune(db)
        db.execute("DELETE FROM store_meta WHERE key = 'purge_pending'")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return dropped


def _json(values: list[str]) -> str:
    return json.dumps(values)


def _count(db: Database, sql: str, param: str) -> int:
    return int(db.scalar(sql, (param,)) or 0)


def _delete(db: Database, sql: str, params: tuple[str, ...]) -> int:
    db.execute(sql, params)
    return db.changes()
