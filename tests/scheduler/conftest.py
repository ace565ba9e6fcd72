"""Fixtures for the scheduler tests: an on-disk store, a fake clock, a fake engine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from scheduler_support import FakeClock, open_store

from mindfile.scheduler import SqliteSchedulerStore


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "mindfile.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SqliteSchedulerStore]:
    s = open_store(db_path)
    yield s
    s.db.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def engine(store: SqliteSchedulerStore) -> SimpleNamespace:
    """The slice of the engine the scheduler uses: ``.db`` and ``.schedules``."""
    return SimpleNamespace(db=store.db, schedules=store)
