"""Fixtures for the scheduler tests: an on-disk store, a fake clock, a fake engine."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from scheduler_support import FakeClock, open_pg_store, open_store

from mindfile.scheduler import SqliteSchedulerStore


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "mindfile.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SqliteSchedulerStore]:
    s = open_store(db_path)
    yield s
    s.db.close()


@pytest.fixture(params=["sqlite", "postgres"])
def make_any_store(request: pytest.FixtureRequest, db_path: Path) -> Iterator[Callable[..., Any]]:
    """Opens scheduler stores of one backend (the store-conformance tests run on both):
    SQLite on ``db_path``, or Postgres on a fresh database of the session's server."""
    opened: list[Any] = []

    def make(**options: Any) -> Any:
        if request.param == "sqlite":
            made = open_store(db_path, **options)
        else:
            made = open_pg_store(request.getfixturevalue("pg_url"), **options)
        opened.append(made)
        return made

    yield make
    for made in opened:
        made.db.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def engine(store: SqliteSchedulerStore) -> SimpleNamespace:
    """The slice of the engine the scheduler uses: ``.db`` and ``.schedules``."""
    return SimpleNamespace(db=store.db, schedules=store)
