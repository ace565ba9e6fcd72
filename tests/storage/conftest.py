"""The storage seam's conformance fixture: one engine per backend.

``store_backend`` is parametrised over the backends (only ``"sqlite"`` today); a second
backend (Postgres) adds its name to ``BACKENDS`` and a branch below, and every test in
this package then runs against it too. Tests reach the stores through
``engine.stores`` and create prerequisite rows (sessions, events, chunks) through the
public API, never with SQL, so they hold for any backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import mindfile

BACKENDS = ["sqlite"]


@pytest.fixture(params=BACKENDS)
def store_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[mindfile.Mindfile]:
    """An engine on a real store of the backend, with the hash embedder."""
    if request.param == "sqlite":
        with mindfile.open(tmp_path / "seam.db", embedder="hash") as engine:
            yield engine
    else:  # pragma: no cover - a backend named but not wired up
        pytest.fail(f"no fixture for backend {request.param!r}")
