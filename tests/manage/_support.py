"""Helpers for the memory-management tests: consistency checks, row snapshots, clocks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from backends import is_postgres, raw
from core._support import assert_consistent as assert_core_consistent

import mindfile

SNAPSHOT_TABLES = {
    "conversation_events": "session_id, sequence",
    "chunks": "id",
    "chunks_vec": "chunk_rowid",
    "event_chunks": "session_id, sequence, chunk_rowid",
    "notes": "session_id, note_id",
    "consolidations": "id",
    "quotas": "scope",
}


def assert_consistent(mem: mindfile.Mindfile) -> None:
    """The core checks (integrity, one vector and FTS row per chunk) plus foreign keys:
    every ``event_chunks`` link points at a live chunk and a live event."""
    assert_core_consistent(mem)
    if not is_postgres(mem):  # Postgres checks foreign keys on every statement
        assert mem.db.query("PRAGMA foreign_key_check") == []


def snapshot(mem: mindfile.Mindfile) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the tables memory management touches, in a stable order."""
    return {
        table: [tuple(r) for r in raw(mem).query(f"SELECT * FROM {table} ORDER BY {order}")]
        for table, order in SNAPSHOT_TABLES.items()
    }


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def ago(**delta: float) -> str:
    """An ISO-8601 UTC time ``delta`` before now (``ago(days=3)``)."""
    return iso(datetime.now(UTC) - timedelta(**delta))


def chunk_row(mem: mindfile.Mindfile, session_id: str, sequence: int) -> dict[str, Any]:
    """The (single) chunk linked to an event, as a dict of its management columns."""
    rows = chunk_rows(mem, session_id, sequence)
    assert len(rows) == 1, rows
    return rows[0]


def chunk_rows(mem: mindfile.Mindfile, session_id: str, sequence: int) -> list[dict[str, Any]]:
    """The chunks linked to an event, with their management columns."""
    cols = (
        "id, chunk_id, chunk_text, importance, pinned, expires_at, consolidated_at, "
        "access_count, last_accessed_at, created_at, sequence_start, sequence_end"
    )
    rows = raw(mem).query(
        f"SELECT {cols} FROM chunks WHERE id IN (SELECT chunk_rowid FROM event_chunks "
        "WHERE session_id = ? AND sequence = ?) ORDER BY id",
        (session_id, sequence),
    )
    names = [c.strip() for c in cols.split(",")]
    return [dict(zip(names, r, strict=True)) for r in rows]


def age_event(mem: mindfile.Mindfile, session_id: str, sequence: int, created_at: str) -> None:
    """Backdate an event and its chunks (tests only: Mindfile never rewrites timestamps)."""
    with raw(mem).atomic():
        raw(mem).execute(
            "UPDATE conversation_events SET created_at = ? WHERE session_id = ? AND sequence = ?",
            (created_at, session_id, sequence),
        )
        raw(mem).execute(
            "UPDATE chunks SET created_at = ? WHERE id IN (SELECT chunk_rowid FROM "
            "event_chunks WHERE session_id = ? AND sequence = ?)",
            (created_at, session_id, sequence),
        )


def expire_event(mem: mindfile.Mindfile, session_id: str, sequence: int) -> None:
    """Move an event's expiry into the past (as if its TTL had run out)."""
    raw(mem).execute(
        "UPDATE chunks SET expires_at = ? WHERE id IN (SELECT chunk_rowid FROM event_chunks "
        "WHERE session_id = ? AND sequence = ?)",
        (ago(seconds=1), session_id, sequence),
    )


def live_sequences(mem: mindfile.Mindfile, session_id: str) -> list[int]:
    return [r.sequence for r in mem.recall(session_id)]
