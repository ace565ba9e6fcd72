"""The Postgres backend is optional: the SQLite engine never imports its drivers, and
``mindfile.open`` opens Postgres URLs (typed errors, no password shown)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import mindfile
from mindfile.errors import ConfigError, DatabaseConnectionError

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
def test_open_connects_to_postgres_urls_and_never_shows_the_password(
    scheme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    url = f"{scheme}://ann:s3cret@/memory?host=/nonexistent-socket-dir&connect_timeout=2"
    with pytest.raises(DatabaseConnectionError) as raised:
        mindfile.open(url, embedder="hash")
    error = raised.value
    assert error.code == "db_connection"
    assert "s3cret" not in str(error) and "s3cret" not in str(error.to_dict())
    assert os.listdir(tmp_path) == []  # nothing created on disk


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"durability": "full"}, "durability"),
        ({"vector_index": "sqlite-vec"}, "sqlite-vec"),
        ({"vector_index": "zvec"}, "zvec"),
        ({"vector_index": "lancedb"}, "lancedb"),
    ],
)
def test_file_only_options_are_config_errors_on_postgres(
    options: dict[str, object], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused before connecting (the host does not exist)."""
    monkeypatch.chdir(tmp_path)
    url = "postgresql://ann:s3cret@/memory?host=/nonexistent-socket-dir"
    with pytest.raises(ConfigError, match=says) as raised:
        mindfile.open(url, embedder="hash", **options)  # type: ignore[arg-type]
    assert not isinstance(raised.value, DatabaseConnectionError)
    assert "s3cret" not in str(raised.value)
    assert os.listdir(tmp_path) == []
