"""Fixtures shared by every test package: engines on disk and in memory.

``mem`` and ``mem_memory`` use the deterministic hash embedder (fast, no model load);
``mem_static`` uses the bundled static model, for tests about meaning.
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
