"""Helpers shared by the scheduler tests (imported by name; conftest holds fixtures)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mindfile.scheduler import SqliteSchedulerStore
from mindfile.storage import Database, apply_migrations

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@dataclass
class FakeClock:
    """A settable clock for runners."""

    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


def open_pg_store(url: str, **options: Any) -> Any:
    """A :class:`PgSchedulerStore` on its own pool to the database at ``url`` (migrated)."""
    from mindfile.storage.postgres import PgDatabase, apply_pg_migrations
    from mindfile.storage.postgres.scheduler import PgSchedulerStore

    db = PgDatabase(url)
    apply_pg_migrations(db)
    return PgSchedulerStore(db, **options)


def open_store(path: Path | str, **options: Any) -> SqliteSchedulerStore:
    """A store on its own connection to ``path`` (migrations applied)."""
    db = Database(path)
    apply_migrations(db)
    return SqliteSchedulerStore(db, **options)
