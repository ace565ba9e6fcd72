"""The Runner: firing, missed runs, failures, one-shots, notification, leases, concurrency."""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from scheduler_support import T0, FakeClock, open_store

from mindfile.errors import ConfigError
from mindfile.scheduler import (
    HandlerResult,
    NotificationPolicy,
    Runner,
    RunStatus,
    ScheduleCadence,
    ScheduleDefinition,
    ScheduleRunRecord,
    ScheduleSearchFilters,
    ScheduleStatus,
    SqliteSchedulerStore,
    command_handler,
    record_goal,
)
from mindfile.scheduler._time import iso, now_utc


def add(store: SqliteSchedulerStore, cadence: ScheduleCadence, **kw: Any) -> ScheduleDefinition:
    kw.setdefault("now", T0)
    return store.add(user_id="u1", goal=kw.pop("goal", "digest"), cadence=cadence, **kw)


class Recorder:
    """A handler that remembers what it was called with."""

    def __init__(self, result: Any = "ok") -> None:
        self.calls: list[tuple[str, str | None]] = []
        self.result = result

    def __call__(self, schedule: ScheduleDefinition) -> Any:
        self.calls.append((schedule.schedule_id, schedule.next_run_at))
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


def test_accepts_an_engine_or_a_store(store: SqliteSchedulerStore, engine: Any) -> None:
    assert Runner(engine, record_goal).store is store
    assert Runner(store, record_goal).store is store
    with pytest.raises(ConfigError):
        Runner(SimpleNamespace(), record_goal)
    with pytest.raises(ConfigError):
        Runner(store, record_goal, max_consecutive_failures=0)


def test_fires_due_schedules_and_reschedules(store: SqliteSchedulerStore, clock: FakeClock) -> None:
    s = add(store, ScheduleCadence.interval(3600))
    handler = Recorder(HandlerResult(output="digest sent", turn_count=3, cost=0.25))
    runner = Runner(store, handler, clock=clock)
    assert runner.run_due() == []  # nothing due yet
    clock.advance(hours=1)
    (outcome,) = runner.run_due()
    assert outcome.recorded and outcome.run.status is RunStatus.SUCCEEDED
    assert handler.calls == [(s.schedule_id, s.next_run_at)]
    after = store.get(s.schedule_id)
    assert after.next_run_at == iso(T0 + timedelta(hours=2)) == outcome.next_run_at
    assert after.last_run_status is RunStatus.SUCCEEDED
    (run,) = store.get_run_history(s.schedule_id)
    assert (run.output, run.turn_count, run.cost, run.scheduled_for) == (
        "digest sent",
        3,
        0.25,
        s.next_run_at,
    )
    assert runner.run_due() == []  # the same occurrence never fires twice


def test_missed_runs_fire_once_not_in_a_burst(
    store: SqliteSchedulerStore, clock: FakeClock
) -> None:
    interval = add(store, ScheduleCadence.interval(3600))
    cron = add(store, ScheduleCadence.cron("*/15 * * * *"))
    handler = Recorder()
    clock.advance(days=2, minutes=7)  # the runner was down for two days
    outcomes = Runner(store, handler, clock=clock).run_due()
    assert len(outcomes) == 2 and len(handler.calls) == 2
    assert store.get(interval.schedule_id).next_run_at == iso(T0 + timedelta(days=2, hours=1))
    assert store.get(cron.schedule_id).next_run_at == iso(T0 + timedelta(days=2, minutes=15))
    assert Runner(store, handler, clock=clock).run_due() == []


def test_pauses_after_consecutive_failures(store: SqliteSchedulerStore, clock: FakeClock) -> None:
    s = add(store, ScheduleCadence.interval(60))
    failing = Recorder(RuntimeError("model unavailable"))
    runner = Runner(store, failing, clock=clock, max_consecutive_failures=3)
    for expected in (1, 2):
        clock.advance(minutes=1)
        (outcome,) = runner.run_due()
        assert outcome.run.status is RunStatus.FAILED and outcome.new_status is None
        assert store.get(s.schedule_id).consecutive_failures == expected
    assert "RuntimeError: model unavailable" in (outcome.run.output or "")
    clock.advance(minutes=1)
    (outcome,) = runner.run_due()
    assert outcome.new_status is ScheduleStatus.PAUSED
    paused = store.get(s.schedule_id)
    assert paused.status is ScheduleStatus.PAUSED and paused.consecutive_failures == 3
    clock.advance(hours=1)
    assert runner.run_due() == []


def test_success_resets_failures(store: SqliteSchedulerStore, clock: FakeClock) -> None:
    s = add(store, ScheduleCadence.interval(60))
    handler = Recorder(HandlerResult(output="bad", ok=False))
    runner = Runner(store, handler, clock=clock, max_consecutive_failures=2)
    clock.advance(minutes=1)
    runner.run_due()
    handler.result = None
    clock.advance(minutes=1)
    runner.run_due()
    assert store.get(s.schedule_id).consecutive_failures == 0
    handler.result = 42  # an unsupported return value is a failure, not a crash
    clock.advance(minutes=1)
    (outcome,) = runner.run_due()
    assert outcome.run.status is RunStatus.FAILED and "int" in (outcome.run.output or "")


@pytest.mark.parametrize("ok", [True, False])
def test_one_shot_completes(store: SqliteSchedulerStore, clock: FakeClock, ok: bool) -> None:
    s = add(store, ScheduleCadence.once(T0 + timedelta(minutes=5)))
    handler = Recorder(HandlerResult(ok=ok))
    clock.advance(minutes=5)
    (outcome,) = Runner(store, handler, clock=clock).run_due()
    done = store.get(s.schedule_id)
    assert (done.status, done.next_run_at) == (ScheduleStatus.COMPLETED, None)
    assert outcome.new_status is ScheduleStatus.COMPLETED
    clock.advance(days=1)
    assert Runner(store, handler, clock=clock).run_due() == []


@pytest.mark.parametrize(
    ("policy", "ok", "notified"),
    [
        ("always", True, True),
        ("always", False, True),
        ("on_failure", True, False),
        ("on_failure", False, True),
        ("never", False, False),
    ],
)
def test_notification_policy(
    store: SqliteSchedulerStore, clock: FakeClock, policy: str, ok: bool, notified: bool
) -> None:
    s = add(store, ScheduleCadence.interval(60), notification_policy=policy)
    sent: list[tuple[str, str]] = []

    def notifier(schedule: ScheduleDefinition, run: ScheduleRunRecord) -> None:
        sent.append((schedule.schedule_id, run.run_id))

    clock.advance(minutes=1)
    runner = Runner(store, Recorder(HandlerResult(ok=ok)), clock=clock, notifier=notifier)
    (outcome,) = runner.run_due()
    assert store.get_run_by_id(outcome.run.run_id).notified is notified
    assert sent == ([(s.schedule_id, outcome.run.run_id)] if notified else [])
    assert NotificationPolicy(policy).should_notify(succeeded=ok) is notified


def test_broken_notifier_does_not_stop_the_runner(
    store: SqliteSchedulerStore, clock: FakeClock
) -> None:
    add(store, ScheduleCadence.interval(60))
    add(store, ScheduleCadence.interval(60))

    def notifier(schedule: ScheduleDefinition, run: ScheduleRunRecord) -> None:
        raise OSError("channel down")

    clock.advance(minutes=1)
    outcomes = Runner(store, record_goal, clock=clock, notifier=notifier).run_due()
    assert [o.recorded for o in outcomes] == [True, True]


def test_prunes_history(store: SqliteSchedulerStore, clock: FakeClock) -> None:
    s = add(store, ScheduleCadence.interval(60))
    runner = Runner(store, record_goal, clock=clock, keep_runs=3)
    for _ in range(5):
        clock.advance(minutes=1)
        runner.run_due()
    history = store.get_run_history(s.schedule_id)
    assert len(history) == 3 and history[0].output == "digest"


def test_lost_lease_is_not_recorded(db_path: Path, clock: FakeClock) -> None:
    """Runner A stalls past its lease without renewing; B retakes and records; A's late
    record is refused, so the occurrence is recorded once."""
    store_a, store_b = open_store(db_path), open_store(db_path)
    s = add(store_a, ScheduleCadence.interval(3600))
    clock.advance(hours=1)
    (claim_a,) = store_a.claim_due(clock(), runner_id="A", lease_secs=10)
    clock.advance(seconds=11)
    (outcome_b,) = Runner(store_b, record_goal, clock=clock, lease_secs=10).run_due()
    assert outcome_b.recorded
    late = Runner(store_a, record_goal, clock=clock, lease_secs=10).fire(claim_a)
    assert not late.recorded and "lease" in (late.error or "")
    assert len(store_a.get_run_history(s.schedule_id)) == 1


def test_deleted_mid_run_is_not_recorded(store: SqliteSchedulerStore, clock: FakeClock) -> None:
    s = add(store, ScheduleCadence.interval(60))

    def handler(schedule: ScheduleDefinition) -> str:
        store.delete(schedule.schedule_id)
        return "done"

    clock.advance(minutes=1)
    (outcome,) = Runner(store, handler, clock=clock).run_due()
    assert not outcome.recorded and s.schedule_id in (outcome.error or "")


def test_interrupt_releases_the_lease(store: SqliteSchedulerStore, clock: FakeClock) -> None:
    add(store, ScheduleCadence.interval(60))
    clock.advance(minutes=1)
    with pytest.raises(KeyboardInterrupt):
        Runner(store, Recorder(KeyboardInterrupt()), clock=clock).run_due()
    assert len(Runner(store, record_goal, clock=clock).run_due()) == 1


def test_heartbeat_keeps_a_long_run_leased(db_path: Path) -> None:
    store_a, store_b = open_store(db_path), open_store(db_path)
    past = now_utc() - timedelta(hours=2)
    s = add(store_a, ScheduleCadence.interval(3600), now=past)
    started, release = threading.Event(), threading.Event()

    def slow(schedule: ScheduleDefinition) -> str:
        started.set()
        release.wait(5)
        return "slow"

    runner_a = Runner(store_a, slow, lease_secs=0.3)
    worker = threading.Thread(target=runner_a.run_due)
    worker.start()
    assert started.wait(5)
    time.sleep(0.8)  # well past the 0.3 s lease: only the heartbeat keeps it
    assert store_b.claim_due(now_utc(), runner_id="B", lease_secs=0.3) == []
    release.set()
    worker.join(5)
    (run,) = store_b.get_run_history(s.schedule_id)
    assert run.output == "slow"


def test_run_forever_stops(store: SqliteSchedulerStore) -> None:
    add(store, ScheduleCadence.interval(3600), now=now_utc() - timedelta(hours=2))
    stop = threading.Event()
    handler = Recorder()

    def fire_and_stop(schedule: ScheduleDefinition) -> str:
        handler(schedule)
        stop.set()
        return "ok"

    thread = threading.Thread(
        target=Runner(store, fire_and_stop, poll_interval_secs=0.05).run_forever, args=(stop,)
    )
    thread.start()
    thread.join(5)
    assert not thread.is_alive() and len(handler.calls) == 1


def test_command_handler(store: SqliteSchedulerStore, clock: FakeClock) -> None:
    add(store, ScheduleCadence.interval(60), goal="say hi")
    add(store, ScheduleCadence.interval(60), goal="fail please")
    script = (
        "import os, sys; goal = sys.stdin.read(); "
        "print(os.environ['MINDFILE_SCHEDULE_GOAL'], '|', goal); "
        "sys.exit(3 if 'fail' in goal else 0)"
    )
    handler = command_handler([sys.executable, "-c", script], timeout_secs=30)
    clock.advance(minutes=1)
    outcomes = {
        o.run.output or "": o.run.status for o in Runner(store, handler, clock=clock).run_due()
    }
    assert outcomes["say hi | say hi"] is RunStatus.SUCCEEDED
    (failed,) = [k for k in outcomes if k.startswith("fail")]
    assert "[exit 3]" in failed and outcomes[failed] is RunStatus.FAILED
    missing = command_handler(["/nonexistent/mindfile-test-binary"])
    result = missing(store.search("u1", ScheduleSearchFilters()).items[0])
    assert isinstance(result, HandlerResult) and not result.ok
    assert "cannot run" in result.output


# -- two runners on one file --------------------------------------------------------------

N_SCHEDULES = 30


def _seed(db_path: Path) -> list[str]:
    store = open_store(db_path)
    past = now_utc() - timedelta(hours=2)
    ids = [
        add(store, ScheduleCadence.interval(3600), now=past).schedule_id for _ in range(N_SCHEDULES)
    ]
    store.db.close()
    return ids


def _run_worker(db_path: str, name: str, log_path: str, barrier: Any) -> None:
    """One runner with its own connection; logs each handler call to its own file."""
    store = open_store(db_path)

    def handler(schedule: ScheduleDefinition) -> str:
        with open(log_path, "a", encoding="utf-8") as fh:
            fh.write(f"{schedule.schedule_id} {schedule.next_run_at}\n")
        time.sleep(0.002)  # widen the window for overlap
        return name

    barrier.wait(30)
    Runner(store, handler, runner_id=name, lease_secs=60).run_due()
    store.db.close()


def _check_exactly_once(db_path: Path, ids: list[str], logs: list[Path]) -> None:
    calls = [line for log in logs if log.exists() for line in log.read_text().splitlines()]
    assert len(calls) == len(set(calls)) == N_SCHEDULES  # every occurrence fired once
    assert {c.split()[0] for c in calls} == set(ids)
    store = open_store(db_path)
    assert store.db.scalar("SELECT count(*) FROM schedule_runs") == N_SCHEDULES
    assert store.due_schedules(now_utc(), 100) == []
    workers = {r[0] for r in store.db.query("SELECT output FROM schedule_runs")}
    store.db.close()
    assert workers  # (which runner did what is up to the race)


def test_two_runners_in_threads_never_double_fire(db_path: Path, tmp_path: Path) -> None:
    ids = _seed(db_path)
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    barrier = threading.Barrier(2)
    threads = [
        threading.Thread(target=_run_worker, args=(str(db_path), n, str(log), barrier))
        for n, log in zip(("A", "B"), logs, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    _check_exactly_once(db_path, ids, logs)


def test_two_runners_in_processes_never_double_fire(db_path: Path, tmp_path: Path) -> None:
    ids = _seed(db_path)
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [
        ctx.Process(target=_run_worker, args=(str(db_path), n, str(log), barrier))
        for n, log in zip(("A", "B"), logs, strict=True)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    _check_exactly_once(db_path, ids, logs)


def test_runner_on_a_real_engine(store_location: str) -> None:
    """On both backends: ``Mindfile.schedules`` is the backend's scheduler store."""
    import mindfile

    with mindfile.open(store_location, embedder="hash") as opened:
        mem: Any = opened
        s = mem.schedules.add(
            user_id="u1",
            goal="digest",
            cadence=ScheduleCadence.interval(3600),
            now=now_utc() - timedelta(hours=2),
        )
        (outcome,) = Runner(mem, record_goal).run_due()
        assert (
            outcome.recorded
            and mem.schedules.get(s.schedule_id).last_run_status is RunStatus.SUCCEEDED
        )
