"""The scheduler store on each backend (a SQLite file, a real Postgres): CRUD, pagination,
record-and-reschedule, leases."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from scheduler_support import T0, open_store

from mindfile.errors import (
    ConflictError,
    InvalidInputError,
    LimitExceededError,
    NotFoundError,
)
from mindfile.scheduler import (
    NotificationPolicy,
    RunStatus,
    ScheduleCadence,
    ScheduleDefinition,
    SchedulePatch,
    SchedulerStore,
    ScheduleRunRecord,
    ScheduleSearchFilters,
    ScheduleStatus,
    SqliteSchedulerStore,
    new_schedule,
)
from mindfile.scheduler._time import iso

HOURLY = ScheduleCadence.interval(3600)


@pytest.fixture
def store(make_any_store: Callable[..., Any]) -> Any:
    """A scheduler store on each backend (overrides conftest's SQLite-only one)."""
    return make_any_store()


def add(store: SqliteSchedulerStore, goal: str = "digest", **kw: object) -> ScheduleDefinition:
    kw.setdefault("user_id", "u1")
    kw.setdefault("cadence", HOURLY)
    kw.setdefault("now", T0)
    return store.add(goal=goal, **kw)  # type: ignore[arg-type]


def run_for(
    s: ScheduleDefinition, *, ok: bool = True, output: str = "done", **kw: object
) -> ScheduleRunRecord:
    kw.setdefault("scheduled_for", s.next_run_at)
    kw.setdefault("started_at", T0 + timedelta(hours=1))
    return ScheduleRunRecord.build(
        schedule_id=s.schedule_id,
        finished_at=T0 + timedelta(hours=1, seconds=5),
        status=RunStatus.SUCCEEDED if ok else RunStatus.FAILED,
        output=output,
        **kw,  # type: ignore[arg-type]
    )


def test_is_a_scheduler_store(store: SqliteSchedulerStore) -> None:
    assert isinstance(store, SchedulerStore)


def test_schema_has_the_seed_indexes(db_path: Path) -> None:
    store = open_store(db_path)
    names = {r[0] for r in store.db.query("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {
        "idx_schedules_user",
        "idx_schedules_due",
        "idx_schedules_user_status",
        "idx_schedules_user_name",
        "idx_schedule_runs_schedule_started",
    } <= names
    plan = " ".join(
        str(r)
        for r in store.db.query(
            "EXPLAIN QUERY PLAN SELECT * FROM schedules "
            "WHERE status = 'active' AND next_run_at <= ?",
            ("x",),
        )
    )
    assert "idx_schedules_due" in plan


def test_create_and_get_round_trip(store: SqliteSchedulerStore) -> None:
    created = add(
        store,
        name="morning",
        cadence=ScheduleCadence.cron("0 9 * * *", timezone="Europe/Berlin"),
        notification_policy="on_failure",
        channel_id="slack",
        channel_context_id="C42",
    )
    assert created.schedule_id.startswith("sched-")
    assert created.next_run_at == "2026-06-02T07:00:00.000000+00:00"  # 09:00 CEST
    assert store.get(created.schedule_id) == created
    assert created.notification_policy is NotificationPolicy.ON_FAILURE
    assert created.to_dict()["cadence"] == {
        "kind": "cron",
        "timezone": "Europe/Berlin",
        "expression": "0 9 * * *",
    }


def test_create_validates(store: SqliteSchedulerStore) -> None:
    with pytest.raises(InvalidInputError, match="goal"):
        add(store, goal="  ")
    with pytest.raises(LimitExceededError):
        add(store, goal="x" * 5000)
    with pytest.raises(InvalidInputError, match="shorter than the minimum"):
        add(store, cadence=ScheduleCadence.interval(30))
    with pytest.raises(InvalidInputError, match="not in the future"):
        add(store, cadence=ScheduleCadence.once(T0 - timedelta(seconds=1)))
    with pytest.raises(InvalidInputError, match="notification_policy"):
        add(store, notification_policy="sometimes")
    assert store.count("u1") == 0


def test_duplicate_id_conflicts(store: SqliteSchedulerStore) -> None:
    created = add(store)
    with pytest.raises(ConflictError):
        store.create(replace(created, next_run_at=None), now=T0)


def test_quota_per_user(make_any_store: Callable[..., Any]) -> None:
    store = make_any_store(max_schedules_per_user=2)
    add(store)
    add(store)
    with pytest.raises(LimitExceededError):
        add(store)
    add(store, user_id="u2")


def test_missing_ids_raise_not_found(store: SqliteSchedulerStore) -> None:
    s = add(store)
    calls: list[Callable[[], object]] = [
        lambda: store.get("nope"),
        lambda: store.delete("nope"),
        lambda: store.update("nope", SchedulePatch(goal="x")),
        lambda: store.get_run_history("nope"),
        lambda: store.prune_run_history("nope", 1),
        lambda: store.get_run_by_id("nope"),
        lambda: store.record_run_and_reschedule(
            "nope", replace(run_for(s), schedule_id="nope"), None
        ),
    ]
    for call in calls:
        with pytest.raises(NotFoundError):
            call()


def test_search_paginates_with_total(store: SqliteSchedulerStore) -> None:
    ids = [add(store, goal=f"g{i}", now=T0 + timedelta(minutes=i)).schedule_id for i in range(7)]
    add(store, user_id="other")
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = store.search("u1", ScheduleSearchFilters(limit=3, offset=offset))
        assert page.total == 7
        seen.extend(s.schedule_id for s in page.items)
        offset = page.next_offset
    assert seen == list(reversed(ids))  # newest first, every item exactly once
    beyond = store.search("u1", ScheduleSearchFilters(limit=3, offset=50))
    assert beyond.items == () and beyond.total == 7 and beyond.next_offset is None
    assert beyond.to_dict()["items"] == []


def test_search_filters(store: SqliteSchedulerStore) -> None:
    a = add(store, goal="water the plants", name="plants")
    b = add(store, goal="50% off report", cadence=ScheduleCadence.cron("0 9 * * *"))
    c = add(store, goal="weekly review", cadence=ScheduleCadence.once(T0 + timedelta(days=1)))
    store.update(c.schedule_id, SchedulePatch(status=ScheduleStatus.PAUSED), now=T0)

    def ids(**kw: object) -> set[str]:
        page = store.search("u1", ScheduleSearchFilters(**kw))  # type: ignore[arg-type]
        return {s.schedule_id for s in page.items}

    assert ids(status="paused") == {c.schedule_id}
    assert ids(kind="cron") == {b.schedule_id}
    assert ids(query="PLANTS") == {a.schedule_id}
    assert ids(query="50%") == {b.schedule_id}  # LIKE wildcards are escaped
    assert ids(query="_") == set()
    order = store.search("u1", ScheduleSearchFilters(order="next_run")).items
    assert [s.schedule_id for s in order] == [a.schedule_id, b.schedule_id, c.schedule_id]
    assert store.count("u1") == 3 and store.count("u1", status=ScheduleStatus.ACTIVE) == 2
    with pytest.raises(InvalidInputError):
        ScheduleSearchFilters(limit=0)
    with pytest.raises(LimitExceededError):
        store.search("u1", ScheduleSearchFilters(limit=1000))


def test_update_patch(store: SqliteSchedulerStore) -> None:
    s = add(store, name="old")
    later = T0 + timedelta(minutes=10)
    u = store.update(
        s.schedule_id,
        SchedulePatch(goal="new goal", notification_policy=NotificationPolicy.NEVER),
        now=later,
    )
    assert (u.goal, u.name, u.notification_policy) == ("new goal", "old", NotificationPolicy.NEVER)
    assert u.next_run_at == s.next_run_at and u.updated_at == iso(later)
    assert store.update(s.schedule_id, SchedulePatch(name=""), now=later).name is None
    moved = store.update(
        s.schedule_id, SchedulePatch(cadence=ScheduleCadence.interval(7200)), now=later
    )
    assert moved.next_run_at == iso(later + timedelta(hours=2))
    assert store.get(s.schedule_id) == moved
    assert store.update(s.schedule_id, SchedulePatch()) == moved
    with pytest.raises(InvalidInputError):
        store.update(s.schedule_id, SchedulePatch(cadence=ScheduleCadence.interval(1)))


def test_pause_and_resume_skips_missed_firings(store: SqliteSchedulerStore) -> None:
    s = add(store)
    paused = store.update(s.schedule_id, SchedulePatch(status=ScheduleStatus.PAUSED), now=T0)
    assert paused.next_run_at == s.next_run_at
    assert store.due_schedules(T0 + timedelta(days=1), 10) == []
    resumed_at = T0 + timedelta(days=1, minutes=1)
    resumed = store.update(s.schedule_id, SchedulePatch(status="active"), now=resumed_at)  # type: ignore[arg-type]
    assert resumed.status is ScheduleStatus.ACTIVE
    assert resumed.next_run_at == iso(resumed_at + timedelta(hours=1))


def test_resuming_a_passed_one_shot_needs_a_new_time(store: SqliteSchedulerStore) -> None:
    s = add(store, cadence=ScheduleCadence.once(T0 + timedelta(hours=1)))
    store.update(s.schedule_id, SchedulePatch(status=ScheduleStatus.PAUSED), now=T0)
    with pytest.raises(InvalidInputError, match="one-shot"):
        store.update(
            s.schedule_id, SchedulePatch(status=ScheduleStatus.ACTIVE), now=T0 + timedelta(hours=2)
        )
    done = store.update(s.schedule_id, SchedulePatch(status=ScheduleStatus.COMPLETED), now=T0)
    assert done.next_run_at is None


def test_due_schedules(store: SqliteSchedulerStore) -> None:
    a = add(store, cadence=ScheduleCadence.interval(600))
    b = add(store, cadence=ScheduleCadence.interval(3600))
    c = add(store, cadence=ScheduleCadence.interval(60))
    store.update(c.schedule_id, SchedulePatch(status=ScheduleStatus.PAUSED), now=T0)
    assert store.due_schedules(T0, 10) == []
    assert [s.schedule_id for s in store.due_schedules(T0 + timedelta(hours=2), 10)] == [
        a.schedule_id,
        b.schedule_id,
    ]
    assert len(store.due_schedules(T0 + timedelta(hours=2), 1)) == 1
    with pytest.raises(InvalidInputError):
        store.due_schedules(T0, 0)


def test_record_run_and_reschedule(store: SqliteSchedulerStore) -> None:
    s = add(store)
    run = run_for(s, ok=False, output="x" * 800)
    store.record_run_and_reschedule(s.schedule_id, run, T0 + timedelta(hours=2))
    after = store.get(s.schedule_id)
    assert after.last_run_status is RunStatus.FAILED
    assert after.last_run_at == run.started_at
    assert after.consecutive_failures == 1
    assert after.next_run_at == iso(T0 + timedelta(hours=2))
    stored = store.get_run_by_id(run.run_id)
    assert stored == run
    assert stored.output_summary == "x" * 500 and stored.output == "x" * 800

    second = run_for(after, ok=False)
    store.record_run_and_reschedule(
        s.schedule_id, second, T0 + timedelta(hours=3), ScheduleStatus.PAUSED
    )
    assert store.get(s.schedule_id).consecutive_failures == 2
    assert store.get(s.schedule_id).status is ScheduleStatus.PAUSED
    third = run_for(store.get(s.schedule_id), ok=True)
    store.record_run_and_reschedule(s.schedule_id, third, None, ScheduleStatus.COMPLETED)
    final = store.get(s.schedule_id)
    assert (final.consecutive_failures, final.status, final.next_run_at) == (
        0,
        ScheduleStatus.COMPLETED,
        None,
    )


def test_record_is_atomic(store: SqliteSchedulerStore) -> None:
    s = add(store)
    first = run_for(s)
    store.record_run_and_reschedule(s.schedule_id, first, T0 + timedelta(hours=2))
    before = store.get(s.schedule_id)
    # The run insert fails (duplicate run_id) after the schedule row was read: nothing
    # of the reschedule may survive.
    clash = replace(run_for(before, ok=False), run_id=first.run_id)
    with pytest.raises(ConflictError):
        store.record_run_and_reschedule(s.schedule_id, clash, T0 + timedelta(days=9))
    assert store.get(s.schedule_id) == before
    assert len(store.get_run_history(s.schedule_id)) == 1


def test_same_occurrence_cannot_be_recorded_twice(store: SqliteSchedulerStore) -> None:
    s = add(store)
    store.record_run_and_reschedule(s.schedule_id, run_for(s), T0 + timedelta(hours=2))
    with pytest.raises(ConflictError, match="already recorded"):
        store.record_run_and_reschedule(s.schedule_id, run_for(s), T0 + timedelta(hours=3))
    manual = run_for(s, scheduled_for=None)
    store.record_run_and_reschedule(s.schedule_id, manual, T0 + timedelta(hours=2))
    store.record_run_and_reschedule(
        s.schedule_id, run_for(s, scheduled_for=None), T0 + timedelta(hours=2)
    )
    assert len(store.get_run_history(s.schedule_id)) == 3


def test_record_with_a_lost_claim_writes_nothing(store: SqliteSchedulerStore) -> None:
    s = add(store)
    due = T0 + timedelta(hours=1)
    (claim,) = store.claim_due(due, runner_id="a", lease_secs=60)
    before = store.get(s.schedule_id)
    with pytest.raises(ConflictError, match="lease"):
        store.record_run_and_reschedule(
            s.schedule_id, run_for(s), T0 + timedelta(hours=2), claim_token="someone-else"
        )
    assert store.get(s.schedule_id) == before and store.get_run_history(s.schedule_id) == []
    store.record_run_and_reschedule(
        s.schedule_id, run_for(s), T0 + timedelta(hours=2), claim_token=claim.token
    )
    # The lease is released: the next occurrence can be claimed at once.
    assert store.claim_due(T0 + timedelta(hours=2), runner_id="b", lease_secs=60)


def test_replanned_while_in_flight_keeps_the_users_plan(store: SqliteSchedulerStore) -> None:
    s = add(store)
    store.update(s.schedule_id, SchedulePatch(cadence=ScheduleCadence.interval(86_400)), now=T0)
    replanned = store.get(s.schedule_id)
    store.record_run_and_reschedule(
        s.schedule_id, run_for(s), T0 + timedelta(hours=2), ScheduleStatus.PAUSED
    )
    after = store.get(s.schedule_id)
    assert (after.next_run_at, after.status) == (replanned.next_run_at, ScheduleStatus.ACTIVE)
    assert after.last_run_status is RunStatus.SUCCEEDED


def test_record_checks_the_run_belongs(store: SqliteSchedulerStore) -> None:
    a, b = add(store), add(store)
    with pytest.raises(InvalidInputError):
        store.record_run_and_reschedule(a.schedule_id, run_for(b), None)


def test_history_prune_and_cascade(store: SqliteSchedulerStore) -> None:
    s = add(store)
    runs = []
    for i in range(6):
        run = run_for(s, scheduled_for=None, started_at=T0 + timedelta(minutes=i), output=str(i))
        store.record_run_and_reschedule(s.schedule_id, run, s.next_run_at)
        runs.append(run)
    history = store.get_run_history(s.schedule_id, limit=4)
    assert [r.output for r in history] == ["5", "4", "3", "2"]
    assert store.prune_run_history(s.schedule_id, keep=2) == 4
    assert [r.output for r in store.get_run_history(s.schedule_id)] == ["5", "4"]
    assert store.prune_run_history(s.schedule_id, keep=2) == 0
    with pytest.raises(InvalidInputError):
        store.prune_run_history(s.schedule_id, keep=-1)
    deleted = store.delete(s.schedule_id)
    assert deleted.schedule_id == s.schedule_id
    assert store.db.scalar("SELECT count(*) FROM schedule_runs") == 0
    with pytest.raises(NotFoundError):
        store.get_run_by_id(runs[-1].run_id)


def test_claims(store: SqliteSchedulerStore) -> None:
    a = add(store, cadence=ScheduleCadence.interval(600))
    b = add(store, cadence=ScheduleCadence.interval(3600))
    now = T0 + timedelta(hours=1)
    first = store.claim_due(now, runner_id="r1", lease_secs=30, limit=5)
    assert [c.schedule.schedule_id for c in first] == [a.schedule_id, b.schedule_id]
    assert first[0].scheduled_for == a.next_run_at
    assert store.claim_due(now, runner_id="r2", lease_secs=30, limit=5) == []
    assert store.renew_claim(a.schedule_id, first[0].token, now=now, lease_secs=120)
    assert not store.renew_claim(a.schedule_id, "wrong", now=now, lease_secs=120)
    # b's lease expires after 30 s; a's was renewed to 120 s.
    retaken = store.claim_due(now + timedelta(seconds=31), runner_id="r2", lease_secs=30, limit=5)
    assert [c.schedule.schedule_id for c in retaken] == [b.schedule_id]
    assert store.release_claim(a.schedule_id, first[0].token)
    assert not store.release_claim(a.schedule_id, first[0].token)
    again = store.claim_due(now, runner_id="r3", lease_secs=30)
    assert [c.schedule.schedule_id for c in again] == [a.schedule_id]
    with pytest.raises(InvalidInputError):
        store.claim_due(now, runner_id="r", lease_secs=0)


def test_new_schedule_defaults() -> None:
    d = new_schedule(user_id="u", goal="g", cadence=HOURLY, now=T0)
    assert d.status is ScheduleStatus.ACTIVE and d.next_run_at is None
    assert d.created_at == d.updated_at == iso(T0)
    assert d.to_dict()["last_run_status"] is None
