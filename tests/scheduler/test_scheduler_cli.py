"""``mindfile schedule ...`` through click's CliRunner."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner, Result
from scheduler_support import open_store

import mindfile
import mindfile.cli.schedule as schedule_cli
from mindfile.scheduler._time import now_utc


@pytest.fixture(autouse=True)
def _engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Until the engine exposes ``.schedules``, stand in for it with that slice of it."""
    if hasattr(mindfile.Mindfile, "schedules"):
        return

    def fake_open(db_path: str) -> Any:
        store = open_store(db_path)
        return SimpleNamespace(db=store.db, schedules=store, close=store.db.close)

    monkeypatch.setattr(schedule_cli, "open_engine", fake_open)


def invoke(db: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(schedule_cli.schedule, [*args[:1], "--db", str(db), *args[1:]])
    assert result.exit_code == code, result.output
    return result


def as_json(db: Path, *args: str, code: int = 0) -> Any:
    return json.loads(invoke(db, *args, "--json", code=code).stdout)


def test_add_list_show_update_history_delete(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    created = as_json(
        db,
        "add",
        "--goal",
        "water plants",
        "--cron",
        "0 7 * * *",
        "--tz",
        "Europe/Berlin",
        "--name",
        "plants",
    )
    sid = created["schedule_id"]
    assert created["cadence"]["timezone"] == "Europe/Berlin"
    as_json(db, "add", "--user", "u2", "--goal", "other", "--every", "2h")

    page = as_json(db, "list", "--limit", "1")
    assert page["total"] == 1 and page["items"][0]["schedule_id"] == sid
    assert "plants" in invoke(db, "list").stdout

    assert "next_run_local" in invoke(db, "show", sid).stdout
    assert as_json(db, "show", sid)["name"] == "plants"

    updated = as_json(db, "update", sid, "--pause", "--every", "1h", "--notify", "never")
    assert updated["status"] == "paused" and updated["cadence"]["every_secs"] == 3600
    assert updated["notification_policy"] == "never"
    assert as_json(db, "update", sid, "--resume")["status"] == "active"

    assert as_json(db, "history", sid) == []
    assert "(no runs)" in invoke(db, "history", sid).stdout
    assert as_json(db, "delete", sid) == {"deleted": True, "schedule_id": sid}
    assert as_json(db, "list")["total"] == 0


def test_errors_exit_with_their_code(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    result = invoke(db, "show", "sched-missing", code=4)
    assert "not_found" in result.stderr
    assert as_json(db, "show", "sched-missing", code=4)["error"] == "not_found"
    invoke(db, "add", "--goal", "g", code=2)  # no cadence
    invoke(db, "add", "--goal", "g", "--cron", "0 9 * * *", "--every", "1h", code=2)
    bad = as_json(db, "add", "--goal", "g", "--cron", "not cron", code=2)
    assert bad["error"] == "invalid_input"
    invoke(db, "add", "--goal", "g", "--at", "2001-01-01T00:00:00Z", code=2)


def test_run_due_records_goals(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    store = open_store(db)
    past = now_utc() - timedelta(hours=3)
    due = store.add(user_id="default", goal="stretch", cadence=store_interval(3600), now=past)
    store.add(user_id="default", goal="later", cadence=store_interval(86_400), now=now_utc())
    store.db.close()

    outcomes = as_json(db, "run-due")
    assert [o["schedule_id"] for o in outcomes] == [due.schedule_id]
    assert outcomes[0]["run"]["output"] == "stretch" and outcomes[0]["recorded"]
    assert as_json(db, "run-due") == []  # fired once, next run is in the future
    runs = as_json(db, "history", due.schedule_id)
    assert [r["output_summary"] for r in runs] == ["stretch"]
    assert "0 run(s)" in invoke(db, "run-due").stdout


def test_run_due_with_command(tmp_path: Path) -> None:
    import sys

    db = tmp_path / "e.db"
    store = open_store(db)
    store.add(
        user_id="default",
        goal="hello",
        cadence=store_interval(3600),
        now=now_utc() - timedelta(hours=2),
    )
    store.db.close()
    command = f'{sys.executable} -c "import sys; print(sys.stdin.read().upper())"'
    (outcome,) = as_json(db, "run-due", "--command", command)
    assert outcome["run"]["output"] == "HELLO" and outcome["run"]["status"] == "succeeded"


def store_interval(secs: int) -> Any:
    from mindfile.scheduler import ScheduleCadence

    return ScheduleCadence.interval(secs)
