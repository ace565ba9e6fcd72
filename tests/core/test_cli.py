"""The ``mindfile`` command, in process with click's CliRunner."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
import numpy as np
import numpy.typing as npt
import pytest
from click.testing import CliRunner, Result

import mindfile
from mindfile.cli.main import _register_optional, cli


class QueryOutage:
    """Embeds documents, but every query embedding fails (a provider outage)."""

    model_id = "test-query-outage"
    dimensions = 8

    def __init__(self) -> None:
        self._inner = mindfile.HashEmbedder(8)

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        raise ConnectionError("provider unreachable")


mindfile.register_embedder("test-query-outage", lambda arg: QueryOutage())


@pytest.fixture
def db(store_location: str) -> str:
    """On both backends (tests/conftest.py): a file path or a Postgres URL."""
    return store_location


@pytest.fixture
def invoke(db: str) -> Callable[..., Result]:
    runner = CliRunner()

    def run(*args: str, input: str | None = None, use_db: bool = True) -> Result:
        argv = [*args, "--db", db] if use_db else list(args)
        return runner.invoke(cli, argv, input=input, catch_exceptions=False)

    return run


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def failed(result: Result, code: int, wire: str) -> Result:
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.output
    if result.stdout.startswith("{"):
        assert json.loads(result.stdout)["error"] == wire
    else:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error [{wire}]: "), result.stderr
    return result


@pytest.fixture
def filled(invoke: Callable[..., Result]) -> Callable[..., Result]:
    ok(invoke("add", "trip", "I moved to Lisbon in May", "--embedder", "hash"))
    ok(invoke("add", "trip", "We adopted a cat named Miso", "--tag", "pets"))
    ok(invoke("add", "work", "Lisbon office opens in June", "--role", "assistant"))
    return invoke


def test_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"mindfile, version {mindfile.__version__}"


def test_help_lists_the_commands() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    for name in ("add", "search", "sessions", "recall", "forget", "info"):
        assert name in result.stdout


# -- add -----------------------------------------------------------------------------------


def test_add_human_and_next_sequence(invoke: Callable[..., Result], db: str) -> None:
    first = ok(invoke("add", "s", "hello there", "--embedder", "hash"))
    assert first.stdout.strip() == "stored s #1 (1 new chunk)"
    ok(invoke("add", "s", "again", "--sequence", "10"))
    third = ok(invoke("add", "s", "and again"))
    assert "#11" in third.stdout
    with mindfile.open(db) as mem:
        assert [r.sequence for r in mem.recall("s")] == [1, 10, 11]
        assert mem.recall("s")[0].payload == {"role": "user", "content": "hello there"}


def test_add_json(invoke: Callable[..., Result], db: str) -> None:
    result = ok(
        invoke(
            "add",
            "s",
            "--payload-json",
            '{"role": "tool", "content": "sunny"}',
            "--metadata-json",
            '{"source": "cli"}',
            "--tag",
            "Weather",
            "--embedder",
            "hash",
            "--json",
        )
    )
    assert json.loads(result.stdout) == {"session_id": "s", "sequence": 1, "chunks_added": 1}
    with mindfile.open(db) as mem:
        hit = mem.search("sunny")[0]
        assert hit.metadata == {"source": "cli", "role": "tool", "tags": ["weather"]}


def test_add_from_stdin(invoke: Callable[..., Result], db: str) -> None:
    ok(invoke("add", "s", "-", "--embedder", "hash", input="piped text\n"))
    with mindfile.open(db) as mem:
        assert mem.recall("s")[0].payload["content"] == "piped text\n"


def test_add_conflict_exit_code(invoke: Callable[..., Result], db: str) -> None:
    ok(invoke("add", "s", "one", "--sequence", "5", "--embedder", "hash"))
    failed(invoke("add", "s", "two", "--sequence", "5"), 5, "conflict")
    failed(invoke("add", "s", "two", "--sequence", "3", "--json"), 5, "conflict")
    with mindfile.open(db) as mem:
        assert len(mem.recall("s")) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["s"],  # no text
        ["s", "text", "--payload-json", '"both"'],
        ["s", "--payload-json", "{not json"],
        ["s", "x", "--metadata-json", "[1, 2]"],
        [" ", "blank session"],
        ["s", "x", "--sequence", "-1"],
        ["s", "--payload-json", '{"a": NaN}'],
        ["\udcff", "undecodable session id from a POSIX command line"],
    ],
)
def test_add_invalid_input_exit_code(invoke: Callable[..., Result], args: list[str]) -> None:
    failed(invoke("add", *args, "--embedder", "hash"), 2, "invalid_input")
    failed(invoke("add", *args, "--embedder", "hash", "--json"), 2, "invalid_input")


def test_add_with_a_mismatched_embedder_is_a_config_error(filled: Callable[..., Result]) -> None:
    failed(filled("add", "s", "x", "--embedder", "static"), 3, "config")


# -- search --------------------------------------------------------------------------------


def test_search_human(filled: Callable[..., Result]) -> None:
    lines = ok(filled("search", "Lisbon")).stdout.strip().splitlines()
    assert len(lines) == 3
    assert lines[0].lstrip().startswith("1. ")
    assert "Lisbon" in lines[0] and "#1" in lines[0]
    assert "(degraded" not in "".join(lines)


def test_search_json_and_filters(filled: Callable[..., Result]) -> None:
    data = json.loads(ok(filled("search", "Lisbon", "--mode", "fts", "--json")).stdout)
    assert data["mode"] == "fts" and data["degraded"] is None
    assert {h["session_id"] for h in data["hits"]} == {"trip", "work"}
    only = json.loads(ok(filled("search", "Lisbon", "--session", "work", "--json")).stdout)
    assert [h["session_id"] for h in only["hits"]] == ["work"]
    tagged = json.loads(ok(filled("search", "cat", "--tag", "pets", "--json")).stdout)
    assert [h["text"] for h in tagged["hits"]] == ["We adopted a cat named Miso"]
    rrf = json.loads(
        ok(filled("search", "Lisbon", "--fusion", "rrf", "--top-k", "1", "--json")).stdout
    )
    assert len(rrf["hits"]) == 1
    assert rrf["hits"][0]["score"] < 0.1  # RRF scores are small
    none = ok(filled("search", "Lisbon", "--session", "nobody"))
    assert none.stdout.strip() == "no results"


def test_search_invalid_input(filled: Callable[..., Result]) -> None:
    failed(filled("search", "x", "--top-k", "0"), 2, "invalid_input")
    failed(filled("search", "x", "--top-k", "0", "--json"), 2, "invalid_input")
    bad_mode = filled("search", "x", "--mode", "semantic")
    assert bad_mode.exit_code == 2 and "Traceback" not in bad_mode.output


def test_search_reports_degraded_mode(invoke: Callable[..., Result]) -> None:
    ok(invoke("add", "s", "the lighthouse keeper", "--embedder", "test-query-outage"))
    result = ok(invoke("search", "lighthouse", "--embedder", "test-query-outage"))
    first, second = result.stdout.strip().splitlines()
    assert first.startswith("(degraded: vector search unavailable")
    assert "lighthouse keeper" in second
    outage = ("--embedder", "test-query-outage")
    data = json.loads(ok(invoke("search", "lighthouse", *outage, "--json")).stdout)
    assert data["mode"] == "fts" and "provider unreachable" in data["degraded"]
    failed(invoke("search", "lighthouse", "--mode", "vector", *outage), 7, "embedding")
    failed(invoke("search", "lighthouse"), 3, "config")  # the store's model is not built in


# -- sessions, recall, forget, info ----------------------------------------------------------


def test_sessions(filled: Callable[..., Result]) -> None:
    lines = ok(filled("sessions")).stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["work", "trip"]
    assert "events=2" in lines[1]
    data = json.loads(ok(filled("sessions", "--json")).stdout)
    assert [(s["session_id"], s["last_sequence"], s["event_count"]) for s in data] == [
        ("work", 1, 1),
        ("trip", 2, 2),
    ]


@pytest.mark.sqlite_only("a missing store is a missing file (a Postgres database is created into)")
def test_commands_that_read_need_an_existing_store(invoke: Callable[..., Result], db: str) -> None:
    failed(invoke("sessions"), 4, "not_found")
    failed(invoke("recall", "s", "--json"), 4, "not_found")
    failed(invoke("forget", "s", "--yes"), 4, "not_found")
    assert not Path(db).exists()


def test_recall(filled: Callable[..., Result]) -> None:
    lines = ok(filled("recall", "trip")).stdout.strip().splitlines()
    assert lines == ["#1 user: I moved to Lisbon in May", "#2 user: We adopted a cat named Miso"]
    data = json.loads(ok(filled("recall", "trip", "--limit", "1", "--json")).stdout)
    assert [(r["sequence"], r["payload"]["content"]) for r in data] == [
        (2, "We adopted a cat named Miso")
    ]
    failed(filled("recall", "nobody"), 4, "not_found")
    failed(filled("recall", "trip", "--limit", "-2"), 2, "invalid_input")
    failed(filled("recall", "\udcff"), 2, "invalid_input")


def test_forget(filled: Callable[..., Result], db: str) -> None:
    declined = filled("forget", "trip", input="n\n")
    assert declined.exit_code == 1
    assert "Traceback" not in declined.output
    accepted = ok(filled("forget", "trip", input="y\n"))
    assert accepted.stdout.strip() == "forgot trip"
    failed(filled("forget", "trip", "--yes"), 4, "not_found")
    failed(filled("forget", "\udcff", "--yes"), 2, "invalid_input")
    data = json.loads(ok(filled("forget", "work", "--yes", "--json")).stdout)
    assert data == {"session_id": "work", "forgotten": True}
    with mindfile.open(db) as mem:
        assert mem.list_sessions() == []
        assert mem.info().chunks == 0


def test_info(filled: Callable[..., Result], db: str) -> None:
    human = ok(filled("info")).stdout
    assert "schema version:" in human and "hash-blake3-256 (256 dims)" in human
    assert "sessions:        2" in human
    data = json.loads(ok(filled("info", "--json")).stdout)
    assert data["path"] == db
    assert (data["sessions"], data["events"], data["chunks"], data["vectors"]) == (2, 3, 3, 3)
    assert data["vector_index"] == "exact"  # "auto" below 200,000 chunks, either backend
    assert data["size_bytes"] > 0  # the file and its WAL, or the schema's tables


def test_db_from_environment(tmp_path: Path) -> None:
    path = tmp_path / "env.db"
    runner = CliRunner(env={"MINDFILE_DB": str(path), "MINDFILE_EMBEDDER": "hash"})
    assert runner.invoke(cli, ["add", "s", "from env"]).exit_code == 0
    assert path.exists()
    result = runner.invoke(cli, ["info", "--json"])
    assert json.loads(result.stdout)["embedding_model"] == "hash-blake3-256"


def test_unopenable_store_is_a_storage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["info", "--db", str(tmp_path), "--embedder", "hash"])
    assert result.exit_code == 6
    assert result.stderr.startswith("error [storage]: ")
    assert "Traceback" not in result.output


# -- optional command groups -----------------------------------------------------------------


def fake_importer(modules: dict[str, Any]) -> Callable[[str], Any]:
    def import_module(name: str) -> Any:
        if name not in modules:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        found = modules[name]
        if isinstance(found, BaseException):
            raise found
        return found

    return import_module


def test_optional_groups_are_attached_when_present() -> None:
    @click.group()
    def schedule() -> None:
        """Schedules."""

    @click.command()
    def notes() -> None:
        """Notes."""

    memory = types.SimpleNamespace(notes=notes, facts="not a command")
    group = click.Group("mindfile")
    _register_optional(
        group,
        fake_importer(
            {
                "mindfile.cli.schedule": types.SimpleNamespace(schedule=schedule),
                "mindfile.cli.memory": memory,
            }
        ),
    )
    assert sorted(group.commands) == ["notes", "schedule"]


def test_optional_groups_missing_are_skipped() -> None:
    group = click.Group("mindfile")
    _register_optional(group, fake_importer({}))
    assert group.commands == {}


def test_a_broken_optional_module_is_not_hidden() -> None:
    group = click.Group("mindfile")
    broken = ModuleNotFoundError("No module named 'croniter'", name="croniter")
    with pytest.raises(ModuleNotFoundError):
        _register_optional(group, fake_importer({"mindfile.cli.schedule": broken}))


def test_python_dash_m(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mindfile", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == f"mindfile, version {mindfile.__version__}"
