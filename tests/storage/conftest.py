"""The storage seam's conformance fixture: one harness per backend.

``seam`` is parametrised over the backends; every test in this package runs against
each. SQLite runs behind a real engine; Postgres on a fresh migrated database of the
session's real server (tests/pg_server.py). See tests/storage/_seam.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import mindfile
from mindfile.storage.postgres import PgDatabase, apply_pg_migrations

from ._seam import PgSeam, Seam, SqliteSeam

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def seam(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Seam]:
    """The stores of one backend on a real, empty store."""
    if request.param == "sqlite":
        with mindfile.open(tmp_path / "seam.db", embedder="hash") as engine:
            yield SqliteSeam(engine)
    else:
        url = request.getfixturevalue("pg_url")
        with PgDatabase(url) as db:
            apply_pg_migrations(db)
            yield PgSeam(db)


@pytest.fixture
def store_backend(tmp_path: Path) -> Iterator[mindfile.Mindfile]:
    """A SQLite engine, for the tests that need the whole engine around the stores."""
    with mindfile.open(tmp_path / "seam.db", embedder="hash") as engine:
        yield engine
