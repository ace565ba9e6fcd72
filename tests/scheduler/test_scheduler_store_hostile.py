"""Hostile arguments to every public scheduler-store method: typed errors only.

Whatever a caller (or a model, through the tools) passes - None, wrong types, integers
beyond 64 bits, 1e300, NaN, infinities, lone surrogates, NUL, very long strings -
the store answers with a :class:`~mindfile.errors.MindfileError` subclass, never a bare
``AttributeError``/``TypeError``/``UnicodeEncodeError``, and keeps working afterwards.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scheduler_support import T0

import mindfile
from mindfile.errors import InvalidInputError, MindfileError
from mindfile.scheduler import (
    RunStatus,
    ScheduleCadence,
    SchedulePatch,
    ScheduleRunRecord,
    ScheduleSearchFilters,
    SqliteSchedulerStore,
    new_schedule,
)
from mindfile.tools import dispatch

NAN, INF = float("nan"), float("inf")
LONG = "x" * 200_000

HOSTILE: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**63,
    2**63 - 1,
    2**64,
    -(2**64),
    1e300,
    -1e300,
    NAN,
    INF,
    -INF,
    3.5,
    "",
    " ",
    "\ud800",
    "a\udfffb",
    "\x00",
    "sched-\x00",
    LONG,
    [],
    {},
    ("a",),
    b"bytes",
    object(),
    datetime(2026, 6, 1, 12, 0),  # naive
    datetime.max.replace(tzinfo=timezone(timedelta(hours=-5))),  # overflows in UTC
    "9999-12-31T23:59:59-05:00",
    "not a time",
]

hostile = st.one_of(
    st.sampled_from(HOSTILE),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)

HOURLY = ScheduleCadence.interval(3600)


class Arg:
    """An argument's strategies: ``valid`` values only, or ``any`` (often hostile)."""

    def __init__(self, valid: st.SearchStrategy[Any], any_: st.SearchStrategy[Any]) -> None:
        self.valid, self.any = valid, any_


@pytest.fixture
def store(make_any_store: Callable[..., Any]) -> Any:
    """A scheduler store on each backend (overrides conftest's SQLite-only one)."""
    return make_any_store()


def arg(*valid: Any) -> Arg:
    """One of ``valid``, or (for ``any``) a hostile value."""
    good = st.sampled_from(valid)
    return Arg(good, st.one_of(good, hostile))


def either(*args: Arg) -> Arg:
    return Arg(st.one_of(*(a.valid for a in args)), st.one_of(*(a.any for a in args)))


def recipe(factory: Callable[..., Any], **fields: Arg) -> Arg:
    """A value built inside the checked call, so constructors are fuzzed too.

    ``any`` is a hostile value, or a build with one hostile field (the others valid),
    or a build with any fields.
    """

    def build(kw: dict[str, Any]) -> Build:
        return Build(factory, kw)

    valid = st.fixed_dictionaries({k: f.valid for k, f in fields.items()}).map(build)
    one_bad = st.sampled_from(sorted(fields)).flatmap(
        lambda bad: st.fixed_dictionaries(
            {k: (f.any if k == bad else f.valid) for k, f in fields.items()}
        ).map(build)
    )
    anything = st.fixed_dictionaries({k: f.any for k, f in fields.items()}).map(build)
    return Arg(valid, st.one_of(hostile, one_bad, anything))


class Build:
    def __init__(self, factory: Callable[..., Any], kwargs: dict[str, Any]) -> None:
        self.factory, self.kwargs = factory, kwargs

    def __repr__(self) -> str:
        return f"{getattr(self.factory, '__name__', self.factory)}(**{self.kwargs!r:.300})"


def materialize(value: Any) -> Any:
    if isinstance(value, Build):
        return value.factory(**{k: materialize(v) for k, v in value.kwargs.items()})
    return value


TIMES = (T0, T0.isoformat(), "2026-06-01T12:00:00Z", T0 + timedelta(days=1))
cadences = either(
    arg(HOURLY, ScheduleCadence.cron("0 9 * * *")),
    recipe(ScheduleCadence.interval, every_secs=arg(60, 3600)),
    recipe(ScheduleCadence.cron, expression=arg("0 9 * * *", "* * * * *", "@daily")),
    recipe(ScheduleCadence.once, at=arg(T0 + timedelta(days=1))),
    recipe(
        ScheduleCadence,
        kind=arg("cron", "once", "interval"),
        timezone=arg("UTC", "Europe/Berlin"),
        expression=arg(None, "0 9 * * *"),
        at=arg(None, "2026-07-01T00:00:00+00:00"),
        every_secs=arg(None, 3600),
    ),
)


def methods(ids: list[str]) -> dict[str, tuple[str, dict[str, Arg]]]:
    """Each public store method with a strategy for each of its arguments."""
    sid = arg(*ids, "sched-missing")
    user = arg("u1", "u2")
    definitions = either(
        recipe(
            new_schedule,
            user_id=user,
            goal=arg("digest"),
            cadence=cadences,
            name=arg(None, "n"),
            notification_policy=arg("always", "never"),
            channel_id=arg(None, "c"),
            channel_context_id=arg(None, "chat-1"),
            now=arg(T0),
        ),
    )
    filters = either(
        arg(ScheduleSearchFilters()),
        recipe(
            ScheduleSearchFilters,
            status=arg(None, "active"),
            kind=arg(None, "interval"),
            query=arg(None, "dig"),
            channel_id=arg(None, "c"),
            order=arg("created", "next_run"),
            limit=arg(20),
            offset=arg(0, 5),
        ),
    )
    patches = either(
        recipe(
            SchedulePatch,
            name=arg(None, "renamed"),
            goal=arg(None, "new goal"),
            cadence=either(arg(None), cadences),
            notification_policy=arg(None, "on_failure"),
            status=arg(None, "paused", "active"),
            channel_id=arg(None, "c2"),
            channel_context_id=arg(None, "chat-2"),
        ),
    )
    runs = either(
        recipe(
            ScheduleRunRecord,
            run_id=arg("run-1", "run-2"),
            schedule_id=sid,
            started_at=arg(*TIMES),
            finished_at=arg(*TIMES),
            status=arg("succeeded", "failed"),
            output_summary=arg(None, "ok"),
            output=arg(None, "ok"),
            turn_count=arg(0, 3),
            cost=arg(0.0, 0.25),
            notified=arg(False, True),
            scheduled_for=arg(None, *TIMES),
        ),
    )
    return {
        "add": (
            "add",
            dict(
                user_id=user,
                goal=arg("digest"),
                cadence=cadences,
                name=arg(None, "n"),
                notification_policy=arg("always"),
                channel_id=arg(None, "c"),
                channel_context_id=arg(None, "chat"),
                now=arg(None, T0),
            ),
        ),
        "create": ("create", dict(definition=definitions, now=arg(None, T0))),
        "get": ("get", dict(schedule_id=sid)),
        "search": ("search", dict(user_id=user, filters=filters)),
        "count": ("count", dict(user_id=user, status=arg(None, "active"))),
        "delete": ("delete", dict(schedule_id=sid)),
        "update": ("update", dict(schedule_id=sid, patch=patches, now=arg(None, T0))),
        "due_schedules": ("due_schedules", dict(now=arg(*TIMES), limit=arg(1, 10))),
        "claim_due": (
            "claim_due",
            dict(
                now=arg(*TIMES),
                runner_id=arg("r1"),
                lease_secs=arg(30, 0.5),
                limit=arg(1, 5),
            ),
        ),
        "renew_claim": (
            "renew_claim",
            dict(schedule_id=sid, token=arg("tok"), now=arg(*TIMES), lease_secs=arg(30)),
        ),
        "release_claim": ("release_claim", dict(schedule_id=sid, token=arg("tok"))),
        "record_run_and_reschedule": (
            "record_run_and_reschedule",
            dict(
                schedule_id=sid,
                run=runs,
                next_run_at=arg(None, *TIMES),
                new_status=arg(None, "active", "completed"),
                claim_token=arg(None, "tok"),
            ),
        ),
        "prune_run_history": ("prune_run_history", dict(schedule_id=sid, keep=arg(0, 3))),
        "get_run_history": ("get_run_history", dict(schedule_id=sid, limit=arg(1, 20))),
        "get_run_by_id": ("get_run_by_id", dict(run_id=arg("run-1", "run-missing"))),
    }


def test_every_public_method_is_covered() -> None:
    public = {
        name
        for name in dir(SqliteSchedulerStore)
        if not name.startswith("_") and callable(getattr(SqliteSchedulerStore, name))
    }
    assert public == set(methods([]))


def test_the_postgres_store_has_the_same_public_methods() -> None:
    from mindfile.storage.postgres.scheduler import PgSchedulerStore

    def public(cls: type) -> set[str]:
        return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}

    assert public(PgSchedulerStore) == public(SqliteSchedulerStore)


def test_hostile_arguments_raise_only_typed_errors(store: SqliteSchedulerStore) -> None:
    canary = store.add(user_id="canary", goal="keep me", cadence=HOURLY, now=T0)
    victims = [
        store.add(user_id="u1", goal=f"victim {i}", cadence=HOURLY, now=T0) for i in range(5)
    ]
    table = methods([v.schedule_id for v in victims])

    @settings(max_examples=800)
    @given(data=st.data(), name=st.sampled_from(sorted(table)))
    def run(data: st.DataObject, name: str) -> None:
        method, spec = table[name]
        # Mostly one hostile argument with the others valid (so each check is reached),
        # sometimes anything anywhere.
        target = data.draw(st.sampled_from([*sorted(spec), "*", None]), label="hostile")
        kwargs = {
            k: data.draw(a.any if target in (k, "*") else a.valid, label=k) for k, a in spec.items()
        }
        with contextlib.suppress(MindfileError):  # anything else fails the test
            getattr(store, method)(**{k: materialize(v) for k, v in kwargs.items()})
        # The store still works: no transaction left open, the canary is intact.
        assert not store.db.in_transaction
        assert store.get(canary.schedule_id).goal == "keep me"
        assert store.count("canary") == 1

    run()
    made = store.add(user_id="after", goal="still works", cadence=HOURLY, now=T0)
    record = ScheduleRunRecord.build(
        schedule_id=made.schedule_id,
        started_at=T0,
        finished_at=T0,
        status=RunStatus.SUCCEEDED,
        output="ok",
        scheduled_for=made.next_run_at,
    )
    store.record_run_and_reschedule(made.schedule_id, record, T0 + timedelta(hours=2))
    assert [r.run_id for r in store.get_run_history(made.schedule_id)] == [record.run_id]
    assert store.delete(made.schedule_id).goal == "still works"


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.search("u1", None),
        lambda s: s.search(None, ScheduleSearchFilters()),
        lambda s: s.update("sched-x", None),
        lambda s: s.create(None),
        lambda s: s.record_run_and_reschedule("sched-x", None, None),
        lambda s: s.update("sched-x", SchedulePatch(cadence="every hour")),  # type: ignore[arg-type]
        lambda s: s.get(None),
        lambda s: s.get("\ud800"),
        lambda s: s.claim_due(T0, runner_id="r", lease_secs=NAN),
        lambda s: s.claim_due(T0, runner_id="r", lease_secs=1e300),
        lambda s: s.renew_claim("sched-x", "t", now=T0, lease_secs=None),
        lambda s: s.prune_run_history("sched-x", 2**64),
        lambda s: s.search("u1", ScheduleSearchFilters(offset=2**64)),
    ],
)
def test_the_reported_cases_are_invalid_input(
    store: SqliteSchedulerStore, call: Callable[[SqliteSchedulerStore], Any]
) -> None:
    with pytest.raises(InvalidInputError):
        call(store)


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("schedule_list", {"offset": 2**64}),
        ("schedule_list", {"offset": 1e300}),
        ("schedule_list", {"offset": 2**63}),
        ("schedule_list", {"offset": -1}),
        ("schedule_list", {"limit": 1e300}),
        ("schedule_list", {"query": "\ud800"}),
        ("schedule_history", {"schedule_id": "\ud800"}),
        ("schedule_history", {"schedule_id": "s", "limit": 2**64}),
        ("schedule_delete", {"schedule_id": "\ud800"}),
        ("schedule_update", {"schedule_id": "\ud800", "goal": "g"}),
        ("schedule_create", {"goal": "\ud800", "cadence_type": "interval", "cadence_value": "1h"}),
        (
            "schedule_create",
            {"goal": "g", "cadence_type": "interval", "cadence_value": "1h", "name": "\ud800"},
        ),
    ],
)
def test_scheduler_tools_answer_typed_errors(
    tmp_path: Any, tool: str, args: dict[str, Any]
) -> None:
    with mindfile.open(tmp_path / "tools.db", embedder="hash") as mem:
        out = dispatch(mem, tool, args, user_id="u1", session_id="chat")
        assert out["ok"] is False
        assert out["error"]["code"] == "invalid_input", out


def test_integer_arguments_of_the_scheduler_tools_are_bounded() -> None:
    from mindfile.scheduler.tools import SCHEDULE_TOOLS

    for spec in SCHEDULE_TOOLS:
        for name, prop in spec.parameters["properties"].items():
            if prop.get("type") == "integer":
                assert "minimum" in prop and "maximum" in prop, (spec.name, name)
                assert math.isfinite(prop["maximum"]) and prop["maximum"] < 2**63


def test_datetime_max_in_a_western_zone_is_invalid_input(store: SqliteSchedulerStore) -> None:
    late = datetime.max.replace(tzinfo=timezone(timedelta(hours=-5)))
    with pytest.raises(InvalidInputError):
        store.due_schedules(late, 1)
    assert store.due_schedules(datetime(2026, 1, 1, tzinfo=UTC), 1) == []
