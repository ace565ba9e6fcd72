"""The change logs that triggers keep for derived indexes, read and pruned in one place.

``chunks_changes`` (migration 0001) logs updates of indexed chunk text and deletions;
``chunks_vec_changes`` (migration 0005) logs every insert, update and delete of a
vector. A derived index remembers the last ``seq`` it applied and asks for what came
after; if the log was pruned past that point it must rebuild.
"""

from __future__ import annotations

from mindfile.storage.db import Database, Row

__all__ = ["KEEP", "LOGS", "PRUNE_EVERY", "bounds", "prune", "prune_now_and_then", "read_since"]

LOGS = ("chunks_changes", "chunks_vec_changes")

#: Rows kept in each log. An index that falls further behind rebuilds instead.
KEEP = 100_000

#: The write path prunes on every this-many-th commit of a connection, not every write.
PRUNE_EVERY = 64


def bounds(db: Database, table: str) -> tuple[int, int]:
    """``(oldest, newest)`` seq of ``table``: the oldest still logged (``newest + 1`` when
    the log is empty) and the newest ever assigned."""
    # The newest seq ever assigned comes from sqlite_sequence (AUTOINCREMENT), so a log
    # pruned down to nothing still says how far it went. min() gets its own subquery:
    # min() and max() in one SELECT would scan the whole table.
    row = db.query_one(
        "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?1), 0), "
        f"(SELECT min(seq) FROM {table})",
        (table,),
    )
    assert row is not None
    newest = int(row[0])
    return (newest + 1 if row[1] is None else int(row[1])), newest


def read_since(
    db: Database, table: str, seen: int | None, columns: str = "chunk_rowid"
) -> tuple[int, list[Row] | None]:
    """``(newest_seq, rows)`` logged in ``table`` after ``seen``, oldest first.

    ``seen=None`` (an index about to load everything) returns no rows. ``rows`` is None
    when the log was pruned past ``seen``: the caller must rebuild.
    """
    oldest, newest = bounds(db, table)
    if seen is None or newest <= seen:
        return newest, []
    if seen < oldest - 1:
        return newest, None
    return newest, db.query(
        f"SELECT {columns} FROM {table} WHERE seq > ? AND seq <= ? ORDER BY seq",
        (seen, newest),
    )


def prune(db: Database, tables: tuple[str, ...] = LOGS, keep: int = KEEP) -> None:
    """Drop all but the newest ``keep`` rows of each log (a cheap range delete)."""
    for table in tables:
        db.execute(f"DELETE FROM {table} WHERE seq <= (SELECT max(seq) FROM {table}) - ?", (keep,))


def prune_now_and_then(db: Database) -> None:
    """:func:`prune` on one commit in :data:`PRUNE_EVERY` of this connection."""
    if db.commit_count % PRUNE_EVERY == 0:
        prune(db)
