"""The Postgres schema: numbered, hash-checked migrations applied once (docs/postgres.md)."""

from __future__ import annotations

import dataclasses

import pytest

from mindfile.errors import SchemaError, StorageError
from mindfile.storage.postgres import PgDatabase, apply_pg_migrations, pg_schema_version
from mindfile.storage.postgres.migrations import check_pg_migrations, load_pg_migrations

# Every table of the SQLite schema (storage/migrations/*.sql) that Mindfile writes.
SQLITE_TABLES = {
    "sessions", "conversation_events", "session_state", "files", "chunks", "chunks_vec",
    "store_meta", "chunks_changes", "schedules", "schedule_runs", "notes", "facts",
    "fact_history", "event_chunks", "quotas", "consolidations", "memory_jobs",
    "chunks_vec_changes", "llm_failures", "embedding_cache", "memory_migrations",
}  # fmt: skip


def test_migrations_create_every_table_once(pg_url: str) -> None:
    shipped = load_pg_migrations()
    with PgDatabase(pg_url) as db:
        assert pg_schema_version(db) == 0
        assert apply_pg_migrations(db) == len(shipped)
        tables = {
            r[0]
            for r in db.query("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        }
        assert tables == SQLITE_TABLES
        # A second open applies nothing and records nothing twice.
        assert apply_pg_migrations(db) == len(shipped)
        assert db.scalar("SELECT count(*) FROM memory_migrations") == len(shipped)
        assert check_pg_migrations(db) == len(shipped)
        assert db.scalar("SELECT extname FROM pg_extension WHERE extname = 'vector'") == "vector"


def test_every_text_column_sorts_in_byte_order(pg_url: str) -> None:
    """COLLATE "C" everywhere: orders and ranges agree with SQLite whatever the locale."""
    with PgDatabase(pg_url) as db:
        apply_pg_migrations(db)
        loose = db.query(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND data_type = 'text' "
            "AND collation_name IS DISTINCT FROM 'C'"
        )
        assert loose == []
        assert (
            db.scalar(
                "SELECT count(*) FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND collation_name = 'C'"
            )
            > 50
        )


def test_an_edited_migration_is_refused_before_anything_changes(pg_url: str) -> None:
    shipped = load_pg_migrations()
    with PgDatabase(pg_url) as db:
        apply_pg_migrations(db)
        edited = [*shipped[:-1], dataclasses.replace(shipped[-1], sql=shipped[-1].sql + "\n")]
        with pytest.raises(SchemaError, match="edited after it was applied"):
            apply_pg_migrations(db, edited)
        with pytest.raises(SchemaError, match="edited after it was applied"):
            check_pg_migrations(db, edited)


def test_a_newer_schema_is_refused(pg_url: str) -> None:
    shipped = load_pg_migrations()
    with PgDatabase(pg_url) as db:
        apply_pg_migrations(db)
        with pytest.raises(SchemaError, match="upgrade mindfile"):
            apply_pg_migrations(db, shipped[:-1])


def test_a_failing_migration_leaves_nothing_behind(pg_url: str) -> None:
    shipped = load_pg_migrations()
    broken = dataclasses.replace(
        shipped[0], version=len(shipped) + 1, name="broken",
        sql="CREATE TABLE half_done (x int); SELECT no_such_function();",
    )  # fmt: skip
    with PgDatabase(pg_url) as db:
        with pytest.raises(StorageError, match="no_such_function"):
            apply_pg_migrations(db, [*shipped, broken])
        assert pg_schema_version(db) == len(shipped)
        assert db.scalar("SELECT to_regclass('half_done')") is None


def test_check_refuses_an_empty_database(pg_url: str) -> None:
    with PgDatabase(pg_url) as db, pytest.raises(SchemaError, match="no Mindfile schema"):
        check_pg_migrations(db)
