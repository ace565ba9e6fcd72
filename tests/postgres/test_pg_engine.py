"""The engine on Postgres from several processes: ``mindfile.open("postgresql://...")``
in each, one shared store (real server, real processes; tests/postgres/_engine_child.py).

* Three processes storing into their own sessions and into one shared session lose no
  write, never share a sequence, and each one's searches find the others' committed
  writes (full text and hybrid).
* A writer killed with ``kill -9`` in the middle of ``store_many`` loses only its own
  uncommitted batch: its earlier batch stays, readers and writes that add no chunk
  were not blocked by it, and the next chunk writer (of its session too) does not wait.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mindfile
from mindfile.errors import ReadOnlyError, SchemaError

from ._children import run_children

CHILD = Path(__file__).with_name("_engine_child.py")


def _children(*argvs: list[str], env: dict[str, str], timeout: float = 300) -> list[object]:
    """Run engine processes that start writing at the same moment; their JSON answers."""
    return run_children(CHILD, *argvs, env=env, timeout=timeout)


def test_three_processes_store_and_search_each_others_writes(pg_url: str, tmp_path: Path) -> None:
    names, own, shared = ["a", "b", "c"], 15, 12
    with mindfile.open(pg_url, embedder="hash") as mem:  # creates the schema once
        mem.store("seed", 1, "the store exists")
    done = tmp_path / "done"
    done.mkdir()
    answers = _children(
        *[["mix", pg_url, name, str(own), str(shared), str(done)] for name in names],
        env={"MINDFILE_TEST_WRITERS": str(len(names))},
    )
    with mindfile.open(pg_url, embedder="hash") as mem:
        for name in names:  # every own write, in order
            events = mem.recall(f"own-{name}")
            assert [e.sequence for e in events] == list(range(1, own + 1))
            assert all(f"zq{name}x{e.sequence} " in str(e.payload) for e in events)
        events = mem.recall("shared")
        sequences = [e.sequence for e in events]
        assert sequences == list(range(1, len(names) * shared + 1))  # none lost, none twice
        texts = sorted(str(e.payload) for e in events)
        expected = sorted(
            f"{name} shared zq{name}x{1000 + i}" for name in names for i in range(shared)
        )
        assert texts == expected
        got = sorted(s for answer in answers for s in answer["shared"])  # type: ignore[index]
        assert got == sequences  # each process was handed the sequences it stored
        assert mem.info().chunks == len(names) * (own + shared) + 1
        # This process (opened after them) finds every writer's words too.
        for name in names:
            assert mem.search(f"zq{name}x{own}", mode="fts")[0].text.startswith(name)
    for answer in answers:
        found = answer["found"]  # type: ignore[index]
        assert sorted(found) == names
        assert all(f["fts"] and f["hybrid"] for f in found.values()), found


def test_a_writer_killed_mid_store_many_loses_only_its_own_batch(
    pg_url: str, tmp_path: Path
) -> None:
    with mindfile.open(pg_url, embedder="hash") as mem:
        mem.store("other", 1, "written before the crash")
    marker = tmp_path / "inside"
    child = subprocess.Popen(
        [sys.executable, str(CHILD), "killme", pg_url, "victim", str(marker)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            if child.poll() is not None:
                raise AssertionError(child.communicate()[1].decode())
            assert time.monotonic() < deadline, "the child never reached its transaction"
            time.sleep(0.05)
        with mindfile.open(pg_url, embedder="hash") as mem:
            # Its batch is invisible while uncommitted; readers do not wait for it, nor
            # do writes that add no chunk (chunk writers take turns, as on SQLite).
            assert [e.sequence for e in mem.recall("victim")] == [1, 2, 3]
            assert mem.search("doomed", mode="fts") == []
            mem.write_scratchpad("other", ["written during the crash"])
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    with mindfile.open(pg_url, embedder="hash") as mem:
        assert [e.payload for e in mem.recall("victim")] == [f"committed {i}" for i in (1, 2, 3)]
        assert mem.search("doomed", mode="fts") == []
        pad = mem.read_scratchpad("other")
        assert pad is not None and pad.items == ("written during the crash",)
        # The chunk writers' lock went with the dead connection: the next one does not wait.
        mem.store_many([("other", 2, "written after the crash"), ("third", 1, "also")])
        assert [e.sequence for e in mem.recall("other")] == [1, 2]
        # The dead transaction's session lock went with its connection: the next
        # sequence is free at once, and the sequence the batch had taken is reusable.
        mem.store("victim", 4, "after the crash")
        assert [e.sequence for e in mem.recall("victim")] == [1, 2, 3, 4]
        assert mem.info().chunks == 7


def test_the_engine_on_postgres_reports_its_url_without_the_password(pg_url: str) -> None:
    url = pg_url.replace("postgresql://postgres@", "postgresql://postgres:pw-s3cret@")
    with mindfile.open(url, embedder="hash") as mem:
        mem.store("s", 1, "hello")
        assert "s3cret" not in mem.path and "s3cret" not in repr(mem.info())
        assert mem.info().path == mem.path and mem.path.startswith("postgresql://postgres:***@")
    with mindfile.open(pg_url) as mem:  # reopened without an embedder: the bound model
        assert mem.embedder.model_id == "hash-blake3-256"
        assert [e.payload for e in mem.recall("s")] == ["hello"]


def test_read_only_opens_a_postgres_store_in_read_only_transactions(pg_url: str) -> None:
    with pytest.raises(SchemaError):  # nothing to read, and nothing is created
        mindfile.open(pg_url, embedder="hash", read_only=True)
    with mindfile.open(pg_url, embedder="hash") as mem:
        mem.store("s", 1, "kept safe from readers")
        mem.set_fact("u", "c", "k", "v")
    with mindfile.open(pg_url, read_only=True) as ro:
        assert ro.read_only and ro.embedder.model_id == "hash-blake3-256"
        assert [e.payload for e in ro.recall("s")] == ["kept safe from readers"]
        assert ro.get_fact("u", "c", "k") is not None
        with pytest.raises(ReadOnlyError):
            ro.store("s", 2, "a write")
        with pytest.raises(ReadOnlyError):
            ro.set_fact("u", "c", "k", "changed")
        with pytest.raises(ReadOnlyError):  # a single statement outside a transaction too
            ro.record_use([ro.search("safe", mode="fts")[0].chunk_id])
    with mindfile.open(pg_url, embedder="hash") as mem:
        assert [e.sequence for e in mem.recall("s")] == [1]
        fact = mem.get_fact("u", "c", "k")
        assert fact is not None and fact.value == "v"


def test_the_cli_takes_a_postgres_url(pg_url: str) -> None:
    from click.testing import CliRunner

    from mindfile.cli.main import cli

    with mindfile.open(pg_url, embedder="hash") as mem:
        mem.store("chat", 1, "hello from the cli test", user_id="ann")
    runner = CliRunner()
    out = runner.invoke(cli, ["sessions", "--user", "ann", "--json", "--db", pg_url])
    assert out.exit_code == 0, out.output
    assert [s["session_id"] for s in json.loads(out.output)] == ["chat"]
    secret = pg_url.replace("postgresql://postgres@", "postgresql://postgres:pw-s3cret@")
    broken = secret.replace("host=", "host=/nonexistent")
    out = runner.invoke(cli, ["sessions", "--json", "--db", broken])
    assert out.exit_code != 0 and "db_connection" in out.output
    assert "s3cret" not in out.output


def test_info_measures_the_stores_own_schema(pg_server: object, pg_url: str) -> None:
    """size_bytes is the store's tables with their indexes, in its schema: a second
    store on the same server does not count the first one's rows."""
    other = pg_server.fresh_url()  # type: ignore[attr-defined]
    try:
        with (
            mindfile.open(pg_url, embedder="hash") as big,
            mindfile.open(other, embedder="hash") as empty,
        ):
            before = big.info().size_bytes
            big.store_many([("s", i, "word " * 400 + str(i)) for i in range(300)])
            after = big.info().size_bytes
            assert 0 < before < after
            assert 0 < empty.info().size_bytes < after
    finally:
        pg_server.drop(other)  # type: ignore[attr-defined]
