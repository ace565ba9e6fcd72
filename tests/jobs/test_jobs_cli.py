"""``mindfile jobs``: status, run, reconcile, retry, prune (in process with CliRunner)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from backends import raw
from click.testing import CliRunner, Result

from mindfile.cli.main import cli

from ._support import messages, open_store


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


@pytest.fixture
def store(db_path: Path) -> Path:
    with open_store(db_path) as mem:
        mem.store_many(messages(5))
    return db_path


@pytest.fixture
def invoke(store: Path) -> Callable[..., Result]:
    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(cli, ["jobs", *args, "--db", str(store)], catch_exceptions=False)

    return run


def test_status_run_status(invoke: Callable[..., Result]) -> None:
    before = invoke("status")
    assert before.exit_code == 0, before.output
    assert "pending:        5" in before.output
    ran = invoke("run", "--batch-size", "2", "--json")
    assert ran.exit_code == 0, ran.output
    report = json.loads(ran.output)
    assert (report["claimed"], report["succeeded"], report["batches"]) == (5, 5, 3)
    after = json.loads(invoke("status", "--json").output)
    assert (after["pending"], after["done"], after["backlog"]) == (0, 5, 0)
    assert after["failed_jobs"] == []


def test_run_prints_a_summary(invoke: Callable[..., Result]) -> None:
    result = invoke("run", "--max-jobs", "2")
    assert result.exit_code == 0
    assert result.output.startswith("claimed 2: 2 done, 0 to retry, 0 dead-lettered")


def test_reconcile_check_exits_1_when_inconsistent(
    invoke: Callable[..., Result], store: Path
) -> None:
    assert invoke("run").exit_code == 0
    clean = invoke("reconcile", "--check")
    assert clean.exit_code == 0 and "consistent" in clean.output
    with open_store(store) as mem:
        raw(mem).execute("DELETE FROM chunks_vec WHERE chunk_rowid = 1")
    dirty = invoke("reconcile", "--check", "--json")
    assert dirty.exit_code == 1
    assert json.loads(dirty.output)["missing_vectors"] == 1
    queued = json.loads(invoke("reconcile", "--enqueue-only", "--json").output)
    assert (queued["enqueued"], queued["embedded"]) == (1, 0)
    fixed = invoke("reconcile")
    assert fixed.exit_code == 0, fixed.output
    assert invoke("reconcile", "--check").exit_code == 0


def test_reconcile_leaves_live_jobs_alone(invoke: Callable[..., Result]) -> None:
    result = invoke("reconcile", "--json")
    data = json.loads(result.output)
    # Pending jobs are live: not "missing", nothing to re-queue or embed.
    assert (data["missing_vectors"], data["enqueued"]) == (0, 0)


def test_retry_and_prune(invoke: Callable[..., Result], store: Path) -> None:
    with open_store(store) as mem:
        raw(mem).execute("UPDATE memory_jobs SET status = 'failed' WHERE job_id <= 2")
    listed = json.loads(invoke("status", "--failed", "5", "--json").output)
    assert [j["job_id"] for j in listed["failed_jobs"]] == [1, 2]
    assert "job 1" in invoke("status", "--failed", "5").output
    assert json.loads(invoke("retry", "--json").output) == {"requeued": 2}
    assert invoke("run").exit_code == 0
    assert json.loads(invoke("prune", "--older-than", "0", "--json").output) == {"pruned": 5}


def test_missing_store_is_not_found(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["jobs", "status", "--db", str(tmp_path / "nope.db")])
    assert result.exit_code == 4
    assert "no memory store" in result.output
