"""Numbered migrations: recorded with hashes, idempotent, tamper- and future-proof."""

from __future__ import annotations

from pathlib import Path

import pytest

import mindfile
from mindfile.errors import SchemaError, StorageError
from mindfile.storage.db import Database
from mindfile.storage.migrations import Migration, apply_migrations, load_migrations


def recorded(path: Path) -> list[tuple[int, str, str, str]]:
    db = Database(path)
    try:
        return [tuple(r) for r in db.query("SELECT * FROM memory_migrations ORDER BY version")]
    finally:
        db.close()


def test_shipped_migrations_are_numbered_from_one() -> None:
    migrations = load_migrations()
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))
    assert migrations[0].name == "core"


def test_fresh_database_records_every_migration_with_its_hash(db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash") as mem:
        assert mem.schema_version == len(load_migrations())
    rows = recorded(db_path)
    assert [(v, n, h) for v, n, h, _ in rows] == [
        (m.version, m.name, m.sha256) for m in load_migrations()
    ]
    assert all(len(h) == 64 for _, _, h, _ in rows)


def test_reopening_is_a_no_op(db_path: Path) -> None:
    mindfile.open(db_path, embedder="hash").close()
    before = recorded(db_path)
    with mindfile.open(db_path) as mem:
        assert mem.schema_version == len(before)
        assert apply_migrations(mem.db) == len(before)
    assert recorded(db_path) == before  # same rows, same applied_at


def test_edited_applied_migration_is_refused(db_path: Path) -> None:
    mindfile.open(db_path, embedder="hash").close()
    db = Database(db_path)
    db.execute("UPDATE memory_migrations SET sha256 = ? WHERE version = 1", ("0" * 64,))
    db.close()
    with pytest.raises(SchemaError, match="edited"):
        mindfile.open(db_path, embedder="hash")


def test_database_from_the_future_is_refused(db_path: Path) -> None:
    mindfile.open(db_path, embedder="hash").close()
    db = Database(db_path)
    db.execute("INSERT INTO memory_migrations VALUES (999, 'future', ?, '2099-01-01')", ("f" * 64,))
    db.close()
    with pytest.raises(SchemaError, match="999") as info:
        mindfile.open(db_path, embedder="hash")
    assert info.value.exit_code == 6
    assert info.value.details["version"] == 999


def test_pending_migrations_apply_in_order_each_in_its_own_transaction() -> None:
    shipped = load_migrations()
    db = Database(":memory:")
    try:
        assert apply_migrations(db, shipped) == len(shipped)
        extra = [
            *shipped,
            Migration(len(shipped) + 1, "good", "CREATE TABLE good_one (x INTEGER);"),
            Migration(len(shipped) + 2, "bad", "CREATE TABLE half (x); SELEC nonsense;"),
        ]
        with pytest.raises(StorageError):
            apply_migrations(db, extra)
        tables = {r[0] for r in db.query("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "good_one" in tables  # committed before the bad one ran
        assert "half" not in tables  # the failing migration rolled back as a whole
        assert db.scalar("SELECT max(version) FROM memory_migrations") == len(shipped) + 1
    finally:
        db.close()


def test_pragmas_on_disk(mem: mindfile.Mindfile) -> None:
    assert mem.db.scalar("PRAGMA journal_mode") == "wal"
    assert mem.db.scalar("PRAGMA foreign_keys") == 1


def test_pragmas_in_memory(mem_memory: mindfile.Mindfile) -> None:
    assert mem_memory.db.scalar("PRAGMA journal_mode") == "memory"
    assert mem_memory.db.scalar("PRAGMA foreign_keys") == 1
