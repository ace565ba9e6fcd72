"""Transactions, compare-and-swap, leases and crashes on a real Postgres, with several
threads and several processes (tests/postgres/_pg_child.py) writing at once."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from mindfile.errors import (
    ConfigError,
    ConflictError,
    DatabaseConnectionError,
    InvalidInputError,
    StorageError,
)
from mindfile.index.pipeline import prepare_event
from mindfile.scheduler import ScheduleCadence
from mindfile.storage.postgres import PgDatabase, apply_pg_migrations, redact
from mindfile.storage.postgres.db import _reason
from mindfile.storage.postgres.scheduler import PgSchedulerStore
from mindfile.storage.postgres.stores import pg_stores

from ._children import run_children

CHILD = Path(__file__).with_name("_pg_child.py")
NOW = "2026-01-01T00:00:00.000000+00:00"
PROCESSES = 4


@pytest.fixture
def db(pg_url: str) -> Iterator[PgDatabase]:
    with PgDatabase(pg_url) as opened:
        apply_pg_migrations(opened)
        yield opened


def _session(db: PgDatabase, session_id: str) -> None:
    db.execute(
        "INSERT INTO sessions (session_id, created_at, updated_at) VALUES (%s, %s, %s)",
        (session_id, NOW, NOW),
    )


def _failures(db: PgDatabase, task: str) -> int:
    return int(db.scalar("SELECT count(*) FROM llm_failures WHERE task = %s", (task,)))


def _record(db: PgDatabase, task: str) -> int:
    return pg_stores(db).llm_failures.record(
        task=task, reason="r", message="m", model=None, scope=None, session_id=None,
        raw_excerpt=None, details={}, created_at=NOW,
    )  # fmt: skip


def _children(*argvs: list[str], timeout: float = 120) -> list[object]:
    """Run child processes that start writing at the same moment; their JSON answers."""
    return run_children(CHILD, *argvs, timeout=timeout)


# -- transactions ------------------------------------------------------------------------


def test_atomic_is_all_or_nothing(db: PgDatabase) -> None:
    with pytest.raises(RuntimeError), db.atomic():
        _record(db, "t")
        _record(db, "t")
        raise RuntimeError("boom")
    assert _failures(db, "t") == 0
    # A failing statement rolls back the whole transaction too.
    with pytest.raises(ConflictError), db.atomic():
        _record(db, "t")
        db.execute("INSERT INTO notes (session_id, note_id, sequence) VALUES ('x', 'y', 1)")
    assert _failures(db, "t") == 0 and not db.in_transaction


def test_nested_atomic_is_a_savepoint(db: PgDatabase) -> None:
    with db.atomic():
        _record(db, "outer")
        with pytest.raises(InvalidInputError), db.atomic():
            _record(db, "inner")
            _record(db, "bad\x00text")  # Postgres text cannot hold NUL
        assert db.in_write_transaction
        _record(db, "outer")
    assert (_failures(db, "outer"), _failures(db, "inner")) == (2, 0)


def test_threads_do_not_see_each_other_s_uncommitted_writes(db: PgDatabase) -> None:
    inside, release = threading.Event(), threading.Event()

    def writer() -> None:
        with db.atomic():
            _record(db, "pending")
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    assert inside.wait(10)
    assert not db.in_transaction  # the transaction is the writer thread's, not ours
    assert _failures(db, "pending") == 0
    release.set()
    thread.join(10)
    assert _failures(db, "pending") == 1


def test_a_snapshot_sees_one_state_while_others_commit(db: PgDatabase) -> None:
    _record(db, "seen")
    with db.snapshot():
        assert db.in_transaction and not db.in_write_transaction
        assert _failures(db, "seen") == 1
        writer = threading.Thread(target=_record, args=(db, "seen"))
        writer.start()
        writer.join(10)
        assert _failures(db, "seen") == 1  # the other thread's commit is not visible
        with pytest.raises(StorageError, match="read-only"):
            _record(db, "nope")
    assert _failures(db, "seen") == 2 and not db.in_transaction


# -- compare-and-swap --------------------------------------------------------------------


def _epochs_won_once(wins: list[list[int]], rounds: int) -> None:
    counted = Counter(epoch for won in wins for epoch in won)
    assert sorted(counted) == list(range(rounds))
    assert set(counted.values()) == {1}, counted  # exactly one winner per epoch


def test_summary_cas_from_threads_has_one_winner_per_epoch(db: PgDatabase) -> None:
    _session(db, "s1")
    rounds, states = 40, pg_stores(db).session_state
    wins: list[list[int]] = [[] for _ in range(6)]

    def contend(mine: list[int]) -> None:
        while (epoch := states.summary_epoch("s1")) < rounds:
            if states.swap_summary("s1", epoch, json.dumps({"epoch": epoch + 1}), NOW):
                mine.append(epoch)

    threads = [threading.Thread(target=contend, args=(w,)) for w in wins]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    _epochs_won_once(wins, rounds)
    assert states.read_summary("s1") == {"epoch": rounds}


def test_summary_cas_from_processes_has_one_winner_per_epoch(db: PgDatabase, pg_url: str) -> None:
    _session(db, "s1")
    rounds = 60
    wins = _children(*[["cas", pg_url, "s1", str(rounds), f"p{i}"] for i in range(PROCESSES)])
    _epochs_won_once(wins, rounds)  # type: ignore[arg-type]
    summary = pg_stores(db).session_state.read_summary("s1")
    assert summary is not None and summary["epoch"] == rounds
    last = next(f"p{i}" for i, won in enumerate(wins) if rounds - 1 in won)  # type: ignore[operator]
    assert summary["by"] == last


# -- no lost writes ----------------------------------------------------------------------


def test_concurrent_increments_from_processes_lose_nothing(db: PgDatabase, pg_url: str) -> None:
    _session(db, "s1")
    chunk = db.scalar(
        "INSERT INTO chunks (chunk_id, session_id, chunk_text, content_hash, sequence_start, "
        "sequence_end, created_at) VALUES ('ch_1', 's1', 'text', 'h', 1, 1, %s) RETURNING chunk_id",
        (NOW,),
    )
    times = 50
    found = _children(*[["use", pg_url, chunk, str(times)] for _ in range(PROCESSES)])
    assert found == [times] * PROCESSES
    count = db.scalar("SELECT access_count FROM chunks WHERE chunk_id = %s", (chunk,))
    assert count == PROCESSES * times


def test_writers_in_several_processes_never_share_a_sequence(db: PgDatabase, pg_url: str) -> None:
    count = 25
    got = _children(*[["append", pg_url, "shared", str(count), f"p{i}"] for i in range(PROCESSES)])
    every = [seq for mine in got for seq in mine]  # type: ignore[attr-defined]
    assert sorted(every) == list(range(1, PROCESSES * count + 1))  # no duplicate, no gap
    for mine in got:
        assert mine == sorted(mine)  # monotonic for each writer  # type: ignore[type-var]
    rows = db.query(
        "SELECT sequence, payload_json FROM conversation_events WHERE session_id = 'shared' "
        "ORDER BY sequence"
    )
    assert [r[0] for r in rows] == sorted(every)
    assert db.scalar("SELECT sequence_high_water FROM sessions") == PROCESSES * count
    # Every event got its chunk and, with no vectors given, an embedding job.
    assert db.scalar("SELECT count(*) FROM memory_jobs") == PROCESSES * count


def test_a_sequence_not_above_the_high_water_mark_is_a_conflict_across_processes(
    db: PgDatabase, pg_url: str
) -> None:
    sessions = pg_stores(db).sessions
    with db.atomic():
        sessions.write_event(prepare_event("s", 7, "seven"), None, "none", NOW)
        db.execute("DELETE FROM conversation_events WHERE session_id = 's'")
    with pytest.raises(ConflictError, match="not above"), db.atomic():  # deleted, not reused
        sessions.write_event(prepare_event("s", 7, "seven again"), None, "none", NOW)
    assert sessions.next_sequence("s") == 8


def test_concurrent_openers_apply_each_migration_once(pg_server: object) -> None:
    url = pg_server.fresh_url()  # type: ignore[attr-defined]
    try:
        versions = _children(*[["migrate", url] for _ in range(PROCESSES)])
        assert len(set(versions)) == 1
        with PgDatabase(url) as fresh:
            rows = fresh.query("SELECT version FROM memory_migrations ORDER BY version")
            assert [r[0] for r in rows] == list(range(1, versions[0] + 1))  # type: ignore[operator]
    finally:
        pg_server.drop(url)  # type: ignore[attr-defined]


# -- scheduler leases --------------------------------------------------------------------


def test_scheduler_leases_are_exclusive_across_processes(db: PgDatabase, pg_url: str) -> None:
    store = PgSchedulerStore(db)
    made = {
        store.add(
            user_id=f"u{i % 5}", goal=f"job {i}", cadence=ScheduleCadence.interval(3600), now=NOW
        ).schedule_id
        for i in range(120)
    }
    claimed = _children(
        *[["claim", pg_url, f"runner{i}", str(1 + i % 3)] for i in range(PROCESSES)]
    )
    every = [sid for got in claimed for sid in got]  # type: ignore[attr-defined]
    assert sorted(every) == sorted(made)  # each occurrence handed out exactly once
    assert sum(1 for got in claimed if got) >= 2  # they really competed


def test_job_leases_are_exclusive_across_processes(db: PgDatabase, pg_url: str) -> None:
    sessions = pg_stores(db).sessions
    with db.atomic():  # no vectors: every chunk gets an embedding job
        events = [prepare_event("s", seq, f"chunk text {seq}") for seq in range(1, 121)]
        sessions.write_events(events, None, "none", NOW)
    total = int(db.scalar("SELECT count(*) FROM memory_jobs WHERE status = 'pending'"))
    assert total == 120
    done = _children(*[["work", pg_url, f"w{i}", str(1 + i % 4)] for i in range(PROCESSES)])
    every = [job for mine in done for job in mine]  # type: ignore[attr-defined]
    assert len(every) == len(set(every)) == total  # each job completed exactly once
    assert sum(1 for mine in done if mine) >= 2  # they really competed
    assert db.scalar("SELECT count(*) FROM memory_jobs WHERE status = 'done'") == total
    assert db.scalar("SELECT count(*) FROM chunks_vec") == total


# -- crashes -----------------------------------------------------------------------------


def test_a_writer_killed_mid_transaction_leaves_nothing_and_holds_no_lock(
    db: PgDatabase, pg_url: str, tmp_path: Path
) -> None:
    facts = pg_stores(db).facts
    facts.insert("u1", "c", "k", "committed", "agent", NOW)
    marker = tmp_path / "inside"
    child = subprocess.Popen(
        [sys.executable, str(CHILD), "hold", pg_url, str(marker)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
            assert time.monotonic() < deadline, "the child never opened its transaction"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    assert _failures(db, "doomed") == 0
    fact = facts.get("u1", "c", "k")
    assert fact is not None and fact.value == "committed"
    # The server rolled the dead transaction back and released its row lock: an update of
    # the same row does not wait (a lock time-out would raise).
    with db.atomic():
        db.execute("SET LOCAL lock_timeout = '5s'")
        facts.update(fact.id, "after the crash", "user", NOW)
    after = facts.get("u1", "c", "k")
    assert after is not None and after.value == "after the crash"


def test_a_lock_time_out_is_a_storage_error_not_a_lost_connection(db: PgDatabase) -> None:
    facts = pg_stores(db).facts
    facts.insert("u1", "c", "k", "v", "agent", NOW)
    fact = facts.get("u1", "c", "k")
    assert fact is not None
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:
        with db.atomic():
            facts.update(fact.id, "held", "agent", NOW)
            holding.set()
            done.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert holding.wait(10)
        with pytest.raises(StorageError, match="lock timeout") as raised, db.atomic():
            db.execute("SET LOCAL lock_timeout = '100ms'")
            facts.update(fact.id, "blocked", "agent", NOW)
        assert not isinstance(raised.value, DatabaseConnectionError)
    finally:
        done.set()
        thread.join(10)
    assert db.scalar("SELECT 1") == 1  # the pool still works


# -- connections and credentials ---------------------------------------------------------


def test_redact_hides_passwords_only() -> None:
    assert redact("postgresql://ann:s3cret@db.example:5432/mem") == (
        "postgresql://ann:***@db.example:5432/mem"
    )
    assert redact("postgres://ann@db/mem?sslmode=require&password=s3cret") == (
        "postgres://ann@db/mem?sslmode=require&password=***"
    )
    assert redact("postgresql:///mem?host=/tmp") == "postgresql:///mem?host=/tmp"
    assert redact("postgresql://ann:p%40ss:w@h/db") == "postgresql://ann:***@h/db"
    assert (
        redact("postgresql://h/db?PASSWORD=x&user=ann") == "postgresql://h/db?PASSWORD=***&user=ann"
    )


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://ann:s3cret@/mem?host=/nonexistent-socket-dir",
        "postgresql://ann:s3cret@127.0.0.1:1/mem?connect_timeout=2",
        "postgres://ann@127.0.0.1:1/mem?password=s3cret",
    ],
)
def test_connection_failures_are_typed_and_never_show_the_password(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(DatabaseConnectionError) as raised:
        PgDatabase(url, timeout=2)
    error = raised.value
    shown = " ".join([str(error), repr(error), json.dumps(error.to_dict()), caplog.text])
    assert "s3cret" not in shown
    assert "ann" in str(error) and error.code == "db_connection" and error.http_status == 503
    assert error.__cause__ is None  # the driver's exception (and its text) is not chained


@pytest.mark.parametrize("url", ["seam.db", "host=db dbname=mem password=s3cret", "mysql://x/y"])
def test_only_postgres_urls_are_accepted(url: str) -> None:
    with pytest.raises(ConfigError, match="postgresql://") as raised:
        PgDatabase(url)
    assert "s3cret" not in str(raised.value)


def test_reasons_never_carry_the_password() -> None:
    url = "postgresql://ann:p%40ss@h/db?password=qu3ry"
    error = psycopg.OperationalError("auth failed for p@ss and p%40ss and qu3ry\nmore")
    assert _reason(error, url) == "auth failed for *** and *** and ***"


def test_a_lost_connection_is_typed_the_pool_recovers_and_the_password_stays_hidden(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # The test server trusts every login, so the password is carried but not checked:
    # what matters here is that it never shows.
    url = pg_url.replace("postgresql://postgres@", "postgresql://postgres:pw-s3cret@")
    with PgDatabase(url, max_size=1) as db:
        pid = db.scalar("SELECT pg_backend_pid()")
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(DatabaseConnectionError) as raised:
            db.scalar("SELECT 1")
        assert db.scalar("SELECT pg_backend_pid()") != pid  # a new connection
        shown = " ".join([caplog.text, str(raised.value), repr(db), db.display])
    assert "pw-s3cret" not in shown
    assert "postgres:***@" in str(raised.value)


def test_credentials_from_pg_environment_variables(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The URL names only the database; libpq takes the socket folder and user from PG*.
    parts = urllib.parse.urlsplit(pg_url)
    database = parts.path.lstrip("/")
    monkeypatch.setenv("PGHOST", urllib.parse.parse_qs(parts.query)["host"][0])
    monkeypatch.setenv("PGUSER", "postgres")
    with PgDatabase(f"postgresql:///{database}") as env_db:
        assert env_db.scalar("SELECT current_database()") == database
