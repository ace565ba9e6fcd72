"""What changed in the database since a BM25 state (:mod:`mindfile.retrieve.lexical`)
last read it: new chunks after the highest id it holds (ids only grow), and updates of
indexed text and deletions from ``chunks_changes`` (triggers, migration 0001)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import NamedTuple

from mindfile.retrieve.lexical_state import State
from mindfile.storage.backend import AnyDatabase
from mindfile.storage.index_source import ChunkText, IndexSourceStore

__all__ = ["Changes", "read_changes"]


class Changes(NamedTuple):
    """One read to apply to a state."""

    #: the database's change token when read (the state is up to date at it)
    version: tuple[int, int]
    #: the newest ``chunks_changes`` sequence read
    newest: int
    #: ``(chunk id, op)`` of the logged updates and deletions since the state's last read
    logged: list[tuple[int, str]]
    #: the new chunks (a page of them) and the updated ones, to tokenise
    rows: list[ChunkText]
    #: a full page of new chunks: read again after applying this one
    more: bool


def read_changes(
    db: AnyDatabase,
    source: IndexSourceStore,
    state: State,
    *,
    dirty: Callable[[], bool],
    lock: threading.Lock,
    page: int,
) -> Changes | None:
    """What to apply to ``state``, or None when it is up to date (or the database is
    inside a write transaction). ``dirty`` says whether this process wrote since
    ``state`` last caught up (its own commits leave the change token unchanged); new
    chunks are read ``page`` at a time, so a build after a bulk ingest holds the
    database lock for one page at a time, not for the whole backlog. When the change
    log was pruned past what ``state`` saw, ``state`` is reset under the index ``lock``
    and everything is read again."""
    with db.lock:
        if db.in_write_transaction:
            return None
        version = db.change_token()
        if version == state.data_version and not dirty():
            return None
        with db.snapshot():
            fresh = state.max_rowid == 0 and state.base is None
            seen = None if fresh else state.changes_seen
            newest, logged = source.text_changes_since(seen)
            if logged is None:  # the log was pruned past what we saw: reload everything
                with lock:
                    state.reset()
                logged = []
            reread = sorted({int(r) for r, op in logged if op == "u" and int(r) <= state.max_rowid})
            rows = source.chunks_after(state.max_rowid, page)
            more = len(rows) == page
            if reread:
                rows += source.chunks_by_ids(reread)
    return Changes(version, newest, logged, rows, more)
