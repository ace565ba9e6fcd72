"""The tables ``migrate-store`` copies (:mod:`mindfile.storage.transfer`), the columns
both backends share, and what it leaves out as derived: the catalogue, apart from the
copying. A migration that adds a table or a column must add it here
(tests/storage/test_transfer.py holds this list to both fresh schemas)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CHANGE_LOGS",
    "DERIVED_COLUMNS",
    "DERIVED_META",
    "SKIPPED",
    "TABLES",
    "VECTOR",
    "Table",
]


@dataclass(frozen=True, slots=True)
class Table:
    """One copied table: its columns (the same names on both backends), its primary key
    (paging and checksum), and its id counter if it has one."""

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    #: The column whose counter (AUTOINCREMENT / identity) is raised after the copy.
    counter: str | None = None
    #: SQLite's implicit ``rowid``, an explicit ``GENERATED ALWAYS`` identity on Postgres.
    rowid: bool = False


_CHUNK_COLUMNS = (
    "id",
    "chunk_id",
    "session_id",
    "chunk_text",
    "content_hash",
    "sequence_start",
    "sequence_end",
    "metadata_json",
    "created_at",
    "context_before",
    "context_after",
    "importance",
    "pinned",
    "expires_at",
    "consolidated_at",
    "last_accessed_at",
    "access_count",
    "text_hash",
    "file_id",
    "occurred_at",
    "user_statement",
)

#: The vector column's logical name; each backend names it its own way.
VECTOR = "embedding"

#: Every copied table but ``store_meta``, parents before children.
TABLES: tuple[Table, ...] = (
    Table(
        "sessions",
        (
            "rowid",
            "session_id",
            "agent_identity",
            "created_at",
            "updated_at",
            "user_id",
            "channel",
            "sequence_high_water",
        ),
        ("rowid",),
        counter="rowid",
        rowid=True,
    ),
    Table(
        "conversation_events",
        ("session_id", "sequence", "payload_json", "created_at", "occurred_at"),
        ("session_id", "sequence"),
    ),
    Table("session_state", ("session_id", "state_json", "updated_at"), ("session_id",)),
    Table(
        "files",
        (
            "id",
            "session_id",
            "root",
            "path",
            "content_hash",
            "size",
            "mtime_ns",
            "chunk_count",
            "indexed_at",
        ),
        ("id",),
        counter="id",
    ),
    Table("chunks", _CHUNK_COLUMNS, ("id",), counter="id"),
    Table("chunks_vec", ("chunk_rowid", VECTOR, "embedding_model"), ("chunk_rowid",)),
    Table(
        "event_chunks",
        ("session_id", "sequence", "chunk_rowid"),
        ("session_id", "sequence", "chunk_rowid"),
    ),
    Table("notes", ("session_id", "note_id", "sequence"), ("session_id", "note_id")),
    Table(
        "facts",
        ("id", "scope", "category", "key", "value", "source", "created_at", "updated_at"),
        ("id",),
        counter="id",
    ),
    Table(
        "fact_history",
        (
            "id",
            "scope",
            "category",
            "key",
            "value",
            "source",
            "created_at",
            "updated_at",
            "superseded_at",
            "reason",
        ),
        ("id",),
        counter="id",
    ),
    Table(
        "quotas",
        (
            "scope",
            "max_items",
            "max_bytes",
            "policy",
            "evicted_items",
            "evicted_bytes",
            "created_at",
            "updated_at",
        ),
        ("scope",),
    ),
    Table(
        "consolidations",
        (
            "id",
            "kind",
            "session_id",
            "chunk_id",
            "sequence_start",
            "sequence_end",
            "sources_json",
            "created_at",
        ),
        ("id",),
        counter="id",
    ),
    Table(
        "memory_jobs",
        (
            "job_id",
            "chunk_rowid",
            "status",
            "retry_count",
            "next_retry_at",
            "last_error",
            "claim_token",
            "claimed_by",
            "claim_expires_at",
            "created_at",
            "updated_at",
        ),
        ("job_id",),
        counter="job_id",
    ),
    Table(
        "schedules",
        (
            "schedule_id",
            "user_id",
            "name",
            "goal",
            "cadence_json",
            "notification_policy",
            "status",
            "created_at",
            "updated_at",
            "next_run_at",
            "last_run_at",
            "last_run_status",
            "consecutive_failures",
            "channel_id",
            "channel_context_id",
            "claim_token",
            "claimed_by",
            "claim_expires_at",
        ),
        ("schedule_id",),
    ),
    Table(
        "schedule_runs",
        (
            "rowid",
            "run_id",
            "schedule_id",
            "scheduled_for",
            "started_at",
            "finished_at",
            "status",
            "output_summary",
            "output",
            "turn_count",
            "cost",
            "notified",
        ),
        ("rowid",),
        counter="rowid",
        rowid=True,
    ),
    Table(
        "llm_failures",
        (
            "id",
            "task",
            "reason",
            "message",
            "model",
            "scope",
            "session_id",
            "raw_excerpt",
            "details_json",
            "created_at",
        ),
        ("id",),
        counter="id",
    ),
    Table(
        "embedding_cache",
        ("model_id", "text_hash", "embedding_blob", "created_at", "last_used_at"),
        ("model_id", "text_hash"),
    ),
)

#: ``store_meta`` keys of the source's derived state, never copied (module docstring).
DERIVED_META = frozenset(
    {
        "ann_store_id",
        "purge_pending",
        "sqlite_vec_dims",
        "sqlite_vec_changes_seen",
        "sqlite_vec_synced_max",
        "reembed_owner",
        "reembed_target",
    }
)

#: Tables a store holds that are not copied, and why (all derived or bookkeeping).
SKIPPED: dict[str, str] = {
    "chunks_changes": "change log of derived indexes; emptied on the destination",
    "chunks_vec_changes": "change log of derived indexes; emptied on the destination",
    "chunks_fts": "SQLite FTS5 index, filled by the destination's triggers",
    "chunks_vec_index": "sqlite-vec table, rebuilt from chunks_vec when used",
    "memory_migrations": "schema bookkeeping of each backend",
    "sqlite_sequence": "id counters, raised to the source's high-water marks",
}

#: Columns of copied tables that are not copied: computed by the destination.
DERIVED_COLUMNS: dict[str, frozenset[str]] = {
    # search_tsv: Postgres's GENERATED ALWAYS AS (...) STORED; token_set: left NULL, made
    # again by the destination's backfill (token match, mindfile.retrieve.token_match).
    "chunks": frozenset({"search_tsv", "token_set"}),
}

#: Change logs emptied on the destination once the copy is in.
CHANGE_LOGS = ("chunks_changes", "chunks_vec_changes")
