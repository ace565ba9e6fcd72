"""Fixtures shared by every test package: engines on disk and in memory.

``mem`` and ``mem_memory`` use the deterministic hash embedder (fast, no model load);
``mem_static`` uses the bundled static model, for tests about meaning.

**Both backends.** ``store_location`` is parametrised over ``engine_backend``
(``sqlite``: a file path; ``postgres``: a fresh schema's URL on the session's real
server) and ``any_mem`` opens it. A test module about documented behaviour runs on both
by overriding ``db_path`` with ``store_location`` (so ``mem`` and every
``mindfile.open(db_path, ...)`` in it open either backend); a test of a SQLite-only
property there is marked ``@pytest.mark.sqlite_only("why")`` and its Postgres case is
not collected. ``backends.raw(mem)`` runs a test's own SQL with either placeholder style.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import mindfile

# No deadlines: timings on a loaded CI machine are not a property of the code.
settings.register_profile("mindfile", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "mindfile"))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A path for a new store file (not created yet)."""
    return tmp_path / "memory.db"


@pytest.fixture
def mem(db_path: Path) -> Iterator[mindfile.Mindfile]:
    """An on-disk store with the hash embedder."""
    with mindfile.open(db_path, embedder="hash") as store:
        yield store


@pytest.fixture
def mem_static(tmp_path: Path) -> Iterator[mindfile.Mindfile]:
    """An on-disk store with the default bundled static model."""
    with mindfile.open(tmp_path / "static.db") as store:
        yield store


@pytest.fixture
def mem_memory() -> Iterator[mindfile.Mindfile]:
    """An in-memory store with the hash embedder."""
    with mindfile.open(":memory:", embedder="hash") as store:
        yield store


# -- Postgres (the storage seam's second backend; docs/postgres.md) ---------------------

#: The engine's backends, in the order their cases run.
BACKENDS = ("sqlite", "postgres")


@pytest.fixture(params=BACKENDS)
def engine_backend(request: pytest.FixtureRequest) -> str:
    """The backend a both-backend test runs on."""
    return str(request.param)


@pytest.fixture
def store_location(engine_backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Where a new store of ``engine_backend`` lives: a file path (not created yet), or
    the URL of a fresh, empty Postgres schema."""
    if engine_backend == "sqlite":
        return str(tmp_path / "memory.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def any_mem(store_location: str) -> Iterator[mindfile.Mindfile]:
    """A store with the hash embedder, on each backend."""
    with mindfile.open(store_location, embedder="hash") as store:
        yield store


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop the Postgres case of tests marked ``sqlite_only``."""
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = None if callspec is None else callspec.params.get("engine_backend")
        if backend == "postgres" and item.get_closest_marker("sqlite_only") is not None:
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """A real PostgreSQL 18 + pgvector for the whole session (tests/pg_server.py)."""
    import pg_server as support

    server = support.start()
    try:
        yield server
    finally:
        support.stop(server)


@pytest.fixture
def pg_url(pg_server: Any) -> Iterator[str]:
    """The URL of a fresh, empty schema (pgvector available) on the session's server."""
    url = pg_server.fresh_url()
    try:
        yield url
    finally:
        pg_server.drop(url)
