"""``mindfile notes|scratchpad|facts|summary`` in-process with click's CliRunner."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

import mindfile
from mindfile.cli.memory import facts, notes, scratchpad, summary


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


@click.group()
def cli() -> None:
    """The memory groups, mounted as the main CLI mounts them."""


for _group in (notes, scratchpad, facts, summary):
    cli.add_command(_group)


@pytest.fixture
def invoke(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("MINDFILE_DB", str(db_path))
    monkeypatch.setenv("MINDFILE_EMBEDDER", "hash")
    monkeypatch.delenv("MINDFILE_USER", raising=False)
    runner = CliRunner()

    def run(*args: str, code: int = 0, stdin: str | None = None) -> Result:
        result = runner.invoke(cli, list(args), input=stdin)
        assert result.exit_code == code, (result.output, result.exception)
        return result

    return run


def as_json(result: Result) -> Any:
    return json.loads(result.stdout)


def test_notes_roundtrip(invoke: Any, db_path: Path) -> None:
    added = as_json(invoke("notes", "add", "Alice likes jazz.", "--tag", "Music", "--json"))
    note_id = added["note_id"]
    assert note_id.startswith("note-") and added["tags"] == ["music"]
    assert added["session_id"] == "memory:default"
    invoke("notes", "add", "--id", "n2", "--source", "cli", "--json", stdin="From stdin.\n")
    listed = as_json(invoke("notes", "list", "--json"))
    assert [n["note_id"] for n in listed] == ["n2", note_id]
    assert [n["note_id"] for n in as_json(invoke("notes", "list", "--tag", "music", "--json"))] == [
        note_id
    ]
    got = as_json(invoke("notes", "get", "n2", "--json"))
    assert got["content"] == "From stdin.\n" and got["source"] == "cli"
    upd = as_json(invoke("notes", "update", "n2", "--content", "Changed.", "--tag", "x", "--json"))
    assert upd["content"] == "Changed." and upd["tags"] == ["x"]
    assert upd["created_at"] == got["created_at"]
    cleared = as_json(invoke("notes", "update", "n2", "--clear-tags", "--json"))
    assert cleared["tags"] == []
    hits = as_json(invoke("notes", "search", "jazz", "--json"))
    # (the hash embedder's vector leg is noise, so only membership is checked)
    assert note_id in {h["note_id"] for h in hits}
    assert all(set(h) == {"kind", "note_id", "tags", "text", "score"} for h in hits)
    assert "Alice likes jazz." in invoke("notes", "list").stdout
    assert as_json(invoke("notes", "delete", "n2", "--json")) == {"note_id": "n2", "deleted": True}
    with mindfile.open(db_path) as mem:
        assert [n.note_id for n in mem.list_notes("memory:default")] == [note_id]


@pytest.mark.sqlite_only("a missing store is a missing file (a Postgres database is created into)")
def test_notes_errors_and_exit_codes(invoke: Any, db_path: Path) -> None:
    missing = invoke("notes", "list", "--json", code=4)
    assert as_json(missing)["error"] == "not_found"
    assert not Path(db_path).exists()  # read-only commands never create a store
    invoke("notes", "add", "first", "--id", "n1")
    assert as_json(invoke("notes", "get", "nope", "--json", code=4))["error"] == "not_found"
    assert as_json(invoke("notes", "delete", "nope", "--json", code=4))["error"] == "not_found"
    tags = [arg for i in range(17) for arg in ("--tag", f"t{i}")]
    over = invoke("notes", "add", "x", *tags, "--json", code=2)
    assert as_json(over)["error"] == "limit_exceeded"
    both = invoke("notes", "update", "n1", "--tag", "a", "--clear-tags", code=2)
    assert "error [invalid_input]" in both.stderr
    assert "Traceback" not in both.output


def test_user_option_and_env(invoke: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    invoke("notes", "add", "bob's note", "--user", "bob", "--id", "b")
    assert as_json(invoke("notes", "list", "--json")) == []
    monkeypatch.setenv("MINDFILE_USER", "bob")
    assert [n["note_id"] for n in as_json(invoke("notes", "list", "--json"))] == ["b"]


def test_scratchpad_commands(invoke: Any) -> None:
    written = as_json(invoke("scratchpad", "write", "s1", "goal: x", "step 2", "--json"))
    assert written["items"] == ["goal: x", "step 2"]
    shown = as_json(invoke("scratchpad", "show", "s1", "--json"))
    assert shown["items"] == ["goal: x", "step 2"] and shown["updated_at"]
    assert "- goal: x" in invoke("scratchpad", "show", "s1").stdout
    over = invoke("scratchpad", "write", "s1", *(["i"] * 33), "--json", code=2)
    assert as_json(over)["error"] == "limit_exceeded"
    assert as_json(invoke("scratchpad", "show", "s1", "--json"))["items"] == ["goal: x", "step 2"]
    assert as_json(invoke("scratchpad", "clear", "s1", "--json"))["cleared"] is True
    assert as_json(invoke("scratchpad", "show", "s1", "--json"))["items"] == []
    assert "empty" in invoke("scratchpad", "show", "s1").stdout


def test_facts_commands(invoke: Any) -> None:
    fact = as_json(invoke("facts", "set", "Home", "city", "Lisbon", "--json"))
    assert (fact["category"], fact["source"], fact["scope"]) == ("home", "user", "default")
    invoke("facts", "set", "home", "city", "Porto", "--source", "agent")
    got = as_json(invoke("facts", "get", "home", "city", "--history", "--json"))
    assert got["value"] == "Porto" and [h["value"] for h in got["history"]] == ["Lisbon"]
    assert "was: Lisbon" in invoke("facts", "get", "home", "city", "--history").stdout
    assert [f["key"] for f in as_json(invoke("facts", "list", "--json"))] == ["city"]
    assert as_json(invoke("facts", "list", "--category", "food", "--json")) == []
    assert [h["value"] for h in as_json(invoke("facts", "history", "home", "city", "--json"))] == [
        "Lisbon"
    ]
    assert as_json(invoke("facts", "delete", "home", "city", "--keep-history", "--json"))["deleted"]
    assert as_json(invoke("facts", "get", "home", "city", "--json", code=4))["error"] == "not_found"
    invoke("facts", "delete", "home", "city", "--keep-history", code=4)
    assert [h["reason"] for h in as_json(invoke("facts", "history", "home", "city", "--json"))] == [
        "deleted",
        "updated",
    ]
    invoke("facts", "delete", "home", "city")  # a retired fact: its history goes
    assert as_json(invoke("facts", "history", "home", "city", "--json")) == []
    invoke("facts", "delete", "home", "city", code=4)
    invoke("facts", "set", "c", "k", "v", "--source", "robot", code=2)


def test_summary_commands(invoke: Any, db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash") as mem:
        for i in range(1, 11):
            mem.store("chat", i, {"role": "user", "content": f"Message {i}. " + "word " * 40})
    assert as_json(invoke("summary", "show", "chat", "--json", code=4))["error"] == "not_found"
    ran = as_json(invoke("summary", "run", "chat", "--budget", "400", "--json"))
    assert ran["condensed"] > 0 and ran["messages"][0]["role"] == "system"
    assert ran["outcome"] == "condensed"
    again = invoke("summary", "run", "chat", "--budget", "400").stdout
    assert again.startswith("condensed 0 messages (within budget); context ")
    shown = as_json(invoke("summary", "show", "chat", "--json"))
    assert shown["epoch"] == 1 and shown["upper_sequence"] == ran["condensed"]
    assert "Recent condensed turns:" in invoke("summary", "show", "chat").stdout


@pytest.mark.skipif(importlib.util.find_spec("mindfile.cli.main") is None, reason="no main CLI")
def test_the_main_cli_mounts_the_groups() -> None:
    from mindfile.cli.main import cli as main_cli

    assert isinstance(main_cli, click.Group)
    for name in ("notes", "scratchpad", "facts", "summary"):
        assert name in main_cli.commands
