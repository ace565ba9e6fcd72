"""The Postgres backend is optional: the SQLite engine never imports its drivers, and
``mindfile.open`` refuses Postgres URLs with a typed error until the engine runs there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import mindfile
from mindfile.errors import ConfigError, UnsupportedBackendError

SQLITE_SESSION = """
import sys
import mindfile
with mindfile.open(sys.argv[1], embedder="hash") as mem:
    mem.store("s", 1, "hello from a plain SQLite store")
    mem.store_note("ns", "n1", "a note", tags=["t"])
    mem.set_fact("u", "c", "k", "v")
    assert mem.search("hello", mode="fts")
drivers = ("psycopg", "psycopg_pool", "pgvector")
loaded = sorted(m for m in sys.modules if m.split(".")[0] in drivers)
loaded += sorted(m for m in sys.modules if m.startswith("mindfile.storage.postgres"))
print(",".join(loaded))
"""


def test_the_sqlite_engine_never_imports_the_postgres_drivers(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SQLITE_SESSION, str(tmp_path / "plain.db")],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "POSTGRESQL"])
def test_open_refuses_postgres_urls_and_says_what_exists(
    scheme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedBackendError) as raised:
        mindfile.open(f"{scheme}://ann:s3cret@db.example/memory", embedder="hash")
    error = raised.value
    assert isinstance(error, ConfigError) and error.code == "unsupported_backend"
    assert "mindfile.storage.postgres" in str(error) and "docs/postgres.md" in str(error)
    assert "s3cret" not in str(error.to_dict())
    assert os.listdir(tmp_path) == []  # nothing created on disk
