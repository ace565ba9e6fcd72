"""Paths that are not plain files: URLs, SQLite URIs, typos in read-only CLI commands,
and integers beyond SQLite's range (issue 8, parts 3 and 4)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import mindfile
from mindfile.cli.main import cli
from mindfile.errors import ConfigError, InvalidInputError


@pytest.mark.parametrize("url", ["libsql://x.turso.io", "http://localhost/x.db"])
def test_unsupported_urls_are_config_errors_and_create_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="not supported yet"):
        mindfile.open(url, embedder="hash")
    assert os.listdir(tmp_path) == []


def test_sqlite_uris_open_without_junk_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with mindfile.open("store.db", embedder="hash") as mem:
        mem.store("s", 1, "hello from the file")
    with mindfile.open("file:store.db?mode=ro", embedder="hash") as mem:
        assert [r.payload for r in mem.recall("s")] == ["hello from the file"]
    assert not any(name.startswith("file:") for name in os.listdir(tmp_path))


@pytest.mark.parametrize(
    "args",
    [
        ["search", "x"],
        ["info"],
        ["recall", "s"],
        ["sessions"],
    ],
)
def test_read_only_cli_commands_on_a_missing_store_are_not_found(
    tmp_path: Path, args: list[str]
) -> None:
    db = tmp_path / "typo" / "dir" / "x.db"
    result = CliRunner().invoke(cli, [*args, "--db", str(db)], prog_name="mindfile")
    assert result.exit_code == 4, result.output
    assert not (tmp_path / "typo").exists()


def test_integers_beyond_64_bits_are_typed_errors(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "hello")
    mem.store_note("memory:a", "n", "a note")
    for call in (
        lambda: mem.recall("s", limit=2**63),
        lambda: mem.list_notes("memory:a", offset=2**63),
        lambda: mem.pin("s", 2**63),
        lambda: mem.unpin("s", 2**64),
        lambda: mem.mark_important("s", 2**63),
    ):
        with pytest.raises(InvalidInputError):
            call()
    assert [r.sequence for r in mem.recall("s")] == [1]


def test_another_applications_database_is_refused_unmodified(tmp_path: Path) -> None:
    import hashlib

    import apsw

    from mindfile.errors import SchemaError

    path = tmp_path / "their.db"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices (total) VALUES (12.5)")
    conn.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(SchemaError, match="another application"):
        mindfile.open(path, embedder="hash")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    conn = apsw.Connection(str(path))
    assert conn.execute("PRAGMA journal_mode").fetchall() == [("delete",)]
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["invoices"]
    conn.close()


def test_freed_space_is_zeroed(mem: mindfile.Mindfile) -> None:
    assert mem.db.scalar("PRAGMA secure_delete") == 1
