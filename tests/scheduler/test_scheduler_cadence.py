"""Cadence math: cron on a wall clock (DST, month ends), one-shots, intervals, parsing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from mindfile.errors import InvalidInputError
from mindfile.scheduler import (
    ScheduleCadence,
    format_in_timezone,
    next_run_for_cadence,
    parse_cadence,
    parse_duration,
    reschedule,
    revise_cadence,
    validate_cadence,
)

NY = "America/New_York"
BERLIN = "Europe/Berlin"


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def firings(cadence: ScheduleCadence, after: datetime, count: int) -> list[datetime]:
    out: list[datetime] = []
    for _ in range(count):
        nxt = next_run_for_cadence(cadence, out[-1] if out else after)
        assert nxt is not None
        out.append(nxt)
    return out


def local(ts: datetime, zone: str) -> str:
    return ts.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M %Z")


# -- DST ------------------------------------------------------------------------------


def test_spring_forward_new_york_fires_at_end_of_gap() -> None:
    # 2026-03-08: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist.
    cadence = ScheduleCadence.cron("30 2 * * *", timezone=NY)
    got = firings(cadence, utc(2026, 3, 7, 12), 3)
    assert [local(t, NY) for t in got] == [
        "2026-03-08 03:00 EDT",
        "2026-03-09 02:30 EDT",
        "2026-03-10 02:30 EDT",
    ]
    assert got[0] == utc(2026, 3, 8, 7)


def test_spring_forward_berlin_fires_at_end_of_gap() -> None:
    # 2026-03-29: 02:00 CET jumps to 03:00 CEST.
    cadence = ScheduleCadence.cron("30 2 * * *", timezone=BERLIN)
    got = firings(cadence, utc(2026, 3, 28, 12), 2)
    assert [local(t, BERLIN) for t in got] == ["2026-03-29 03:00 CEST", "2026-03-30 02:30 CEST"]


def test_matches_inside_one_gap_collapse_into_one_firing() -> None:
    cadence = ScheduleCadence.cron("0,20,40 2 * * *", timezone=NY)
    got = firings(cadence, utc(2026, 3, 8, 6), 2)  # 01:00 EST on the spring-forward day
    assert [local(t, NY) for t in got] == ["2026-03-08 03:00 EDT", "2026-03-09 02:00 EDT"]


def test_fall_back_daily_job_fires_once() -> None:
    # 2026-11-01: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
    cadence = ScheduleCadence.cron("30 1 * * *", timezone=NY)
    got = firings(cadence, utc(2026, 10, 31, 12), 3)
    assert [local(t, NY) for t in got] == [
        "2026-11-01 01:30 EDT",  # the first occurrence
        "2026-11-02 01:30 EST",
        "2026-11-03 01:30 EST",
    ]


def test_fall_back_berlin_daily_job_fires_once() -> None:
    cadence = ScheduleCadence.cron("30 2 * * *", timezone=BERLIN)
    got = firings(cadence, utc(2026, 10, 24, 12), 3)
    assert [local(t, BERLIN) for t in got] == [
        "2026-10-25 02:30 CEST",
        "2026-10-26 02:30 CET",
        "2026-10-27 02:30 CET",
    ]


def test_fall_back_sub_hourly_job_skips_the_repeated_pass() -> None:
    cadence = ScheduleCadence.cron("*/30 * * * *", timezone=NY)
    got = firings(cadence, utc(2026, 11, 1, 4, 45), 5)  # 00:45 EDT
    assert [local(t, NY) for t in got] == [
        "2026-11-01 01:00 EDT",
        "2026-11-01 01:30 EDT",
        "2026-11-01 02:00 EST",
        "2026-11-01 02:30 EST",
        "2026-11-01 03:00 EST",
    ]


def test_after_inside_repeated_hour_does_not_go_back() -> None:
    cadence = ScheduleCadence.cron("20 1 * * *", timezone=NY)
    after = utc(2026, 11, 1, 6, 10)  # 01:10 EST, second pass; 01:20 EDT already happened
    assert local(next_run_for_cadence(cadence, after), NY) == "2026-11-02 01:20 EST"  # type: ignore[arg-type]


def test_interval_ignores_dst() -> None:
    cadence = ScheduleCadence.interval(3600, timezone=NY)
    got = firings(cadence, utc(2026, 11, 1, 4), 4)
    assert [b - a for a, b in zip([utc(2026, 11, 1, 4), *got], got, strict=False)] == [
        timedelta(hours=1)
    ] * 4


# -- month ends and odd calendars ---------------------------------------------------------


def test_day_31_skips_short_months() -> None:
    cadence = ScheduleCadence.cron("0 9 31 * *")
    got = firings(cadence, utc(2026, 1, 1), 7)
    assert [t.strftime("%m-%d") for t in got] == [
        "01-31",
        "03-31",
        "05-31",
        "07-31",
        "08-31",
        "10-31",
        "12-31",
    ]


def test_feb_29_fires_in_leap_years_only() -> None:
    got = firings(ScheduleCadence.cron("0 9 29 2 *"), utc(2026, 1, 1), 2)
    assert [t.date().isoformat() for t in got] == ["2028-02-29", "2032-02-29"]


def test_last_day_of_month() -> None:
    got = firings(ScheduleCadence.cron("0 9 L * *", timezone=BERLIN), utc(2027, 1, 15), 3)
    assert [local(t, BERLIN)[:10] for t in got] == ["2027-01-31", "2027-02-28", "2027-03-31"]


def test_aliases_expand() -> None:
    assert parse_cadence("cron", "@daily").expression == "0 0 * * *"
    assert next_run_for_cadence(parse_cadence("cron", "@hourly"), utc(2026, 1, 1, 5, 1)) == utc(
        2026, 1, 1, 6
    )


# -- one-shot and interval ----------------------------------------------------------------


def test_once_fires_only_before_its_time() -> None:
    cadence = ScheduleCadence.once(utc(2026, 5, 1, 9))
    assert next_run_for_cadence(cadence, utc(2026, 4, 1)) == utc(2026, 5, 1, 9)
    assert next_run_for_cadence(cadence, utc(2026, 5, 1, 9)) is None
    assert reschedule(cadence, due_at=utc(2026, 5, 1, 9), now=utc(2026, 5, 1, 9, 1)) is None


def test_interval_next_is_exact() -> None:
    cadence = ScheduleCadence.interval(7 * 86_400 + 1)
    after = datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
    assert next_run_for_cadence(cadence, after) == after + timedelta(days=7, seconds=1)


@settings(max_examples=200, deadline=None)
@given(
    every=st.integers(min_value=1, max_value=30 * 86_400),
    due_us=st.integers(min_value=0, max_value=10**15),
    late_us=st.integers(min_value=-(10**9), max_value=10**14),
)
def test_interval_reschedule_keeps_phase_and_skips_missed(
    every: int, due_us: int, late_us: int
) -> None:
    due = datetime(2000, 1, 1, tzinfo=UTC) + timedelta(microseconds=due_us)
    now = due + timedelta(microseconds=late_us)
    nxt = reschedule(ScheduleCadence.interval(every), due_at=due, now=now)
    assert nxt is not None
    step = timedelta(seconds=every)
    assert nxt > now and nxt > due  # strictly in the future: no burst
    assert (nxt - due) % step == timedelta(0)  # exact phase
    assert nxt - step <= max(now, due)  # the first such time


def test_cron_reschedule_after_downtime_is_after_now() -> None:
    cadence = ScheduleCadence.cron("0 * * * *")
    nxt = reschedule(cadence, due_at=utc(2026, 1, 1, 0), now=utc(2026, 1, 3, 5, 30))
    assert nxt == utc(2026, 1, 3, 6)


# -- a brute-force oracle for the DST rule ------------------------------------------------

ZONES = [NY, BERLIN, "Australia/Lord_Howe", "Asia/Kolkata", "UTC"]
EXPRESSIONS = ["30 2 * * *", "*/20 * * * *", "0 1,2,3 * * *", "15 * * * *", "45 1 * * 0"]
AROUND = [utc(2026, 3, 8), utc(2026, 3, 29), utc(2026, 4, 5), utc(2026, 10, 4), utc(2026, 10, 25)]


def matcher(expression: str) -> Callable[[datetime], bool]:
    """A fast wall-clock matcher for expressions without L/# (day-of-month is '*')."""
    fields, _ = croniter.expand(expression)
    minutes, hours, _dom, _month, dows = (None if f == ["*"] else set(f) for f in fields)

    def match(wall: datetime) -> bool:
        return (
            (minutes is None or wall.minute in minutes)
            and (hours is None or wall.hour in hours)
            and (dows is None or (wall.weekday() + 1) % 7 in dows)
        )

    return match


def oracle(expression: str, zone_name: str, after: datetime) -> datetime:
    """Scan UTC minutes: the first whose wall time is a first-occurrence match, or the
    first instant after a gap that swallowed a match."""
    zone, match = ZoneInfo(zone_name), matcher(expression)
    u = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    for _ in range(9 * 1440):
        wall = u.astimezone(zone)
        prev = (u - timedelta(minutes=1)).astimezone(zone)
        naive = wall.replace(tzinfo=None)
        if wall.fold == 0 and match(naive):
            return u
        skipped = prev.replace(tzinfo=None) + timedelta(minutes=1)
        while skipped < naive:  # wall times jumped over at a spring-forward
            if match(skipped):
                return u
            skipped += timedelta(minutes=1)
        u += timedelta(minutes=1)
    raise AssertionError("oracle found nothing")


@settings(max_examples=60, deadline=None)
@given(
    expression=st.sampled_from(EXPRESSIONS),
    zone=st.sampled_from(ZONES),
    base=st.sampled_from(AROUND),
    offset_min=st.integers(min_value=-36 * 60, max_value=36 * 60),
)
def test_cron_matches_brute_force_oracle(
    expression: str, zone: str, base: datetime, offset_min: int
) -> None:
    after = base + timedelta(minutes=offset_min)
    got = next_run_for_cadence(ScheduleCadence.cron(expression, timezone=zone), after)
    assert got == oracle(expression, zone, after)


# -- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cadence", "message"),
    [
        (ScheduleCadence.once(utc(2026, 1, 1)), "not in the future"),
        (ScheduleCadence.interval(59), "shorter than the minimum"),
        (ScheduleCadence.cron("* * * * * *"), "five fields"),
        (ScheduleCadence.cron("61 * * * *"), "invalid cron"),
        (ScheduleCadence.cron("H 9 * * *"), "invalid cron"),
        (ScheduleCadence.cron("0 9 30 2 *"), "never fires"),
        (ScheduleCadence.cron("*/5 * * * *"), "300s apart"),
        (ScheduleCadence.cron("59 23 * * *", timezone=NY), None),
    ],
)
def test_validate_cadence(cadence: ScheduleCadence, message: str | None) -> None:
    now = utc(2026, 6, 1)
    if message is None:
        validate_cadence(cadence, 600, now=now)
        return
    with pytest.raises(InvalidInputError, match=message):
        validate_cadence(cadence, 600 if "300s" in message else 60, now=now)


def test_cron_spacing_counts_the_wrap_between_consecutive_days() -> None:
    now = utc(2026, 6, 1)
    with pytest.raises(InvalidInputError, match="60s apart"):  # 23:59 -> 00:00 next day
        validate_cadence(ScheduleCadence.cron("0,59 0,23 * * *"), 3600, now=now)
    validate_cadence(ScheduleCadence.cron("0 0,23 * * 1"), 3600, now=now)  # Mon only: no wrap
    with pytest.raises(InvalidInputError, match="3600s apart"):
        validate_cadence(ScheduleCadence.cron("0 0,23 * * 1,2"), 7200, now=now)


def test_shape_errors() -> None:
    with pytest.raises(InvalidInputError, match="time zone"):
        ScheduleCadence.cron("0 9 * * *", timezone="Mars/Olympus")
    with pytest.raises(InvalidInputError, match="naive"):
        ScheduleCadence.once(datetime(2026, 1, 1))
    with pytest.raises(InvalidInputError, match="positive"):
        ScheduleCadence.interval(0)
    with pytest.raises(InvalidInputError, match="exactly"):
        ScheduleCadence(kind="cron", expression="0 9 * * *", every_secs=5)
    with pytest.raises(InvalidInputError, match="naive"):
        next_run_for_cadence(ScheduleCadence.interval(60), datetime(2026, 1, 1))


# -- parsing and display ------------------------------------------------------------------


def test_parse_once_reads_naive_times_in_the_zone() -> None:
    cadence = parse_cadence("once", "2026-12-01T09:00", BERLIN)
    assert cadence.at == "2026-12-01T08:00:00.000000+00:00"
    assert format_in_timezone(cadence.at, cadence) == "2026-12-01 09:00 CET"
    gap = parse_cadence("once", "2026-03-08T02:30", NY)  # same DST rule as cron
    assert gap.at == "2026-03-08T07:00:00.000000+00:00"
    assert parse_cadence("once", "2026-12-01T09:00Z").at == "2026-12-01T09:00:00.000000+00:00"


def test_parse_once_relative() -> None:
    cadence = parse_cadence("once", "in 90m", now=utc(2026, 1, 1))
    assert cadence.at == "2026-01-01T01:30:00.000000+00:00"
    assert parse_cadence("once", "+2h", now=utc(2026, 1, 1)).at.startswith("2026-01-01T02:00")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "secs"),
    [("3600", 3600), ("90s", 90), ("15m", 900), ("1h30m", 5400), ("2 days and 3 hours", 183_600)],
)
def test_parse_duration(text: str, secs: int) -> None:
    assert parse_duration(text) == secs
    assert parse_cadence("interval", text).every_secs == secs


@pytest.mark.parametrize("text", ["", "soon", "5 fortnights", "0", "1h x", "-5m"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("kind", "value", "tz"),
    [
        ("weekly", "x", "UTC"),
        ("cron", " ", "UTC"),
        ("once", "tomorrow", "UTC"),
        ("cron", "@x", "UTC"),
    ],
)
def test_parse_cadence_rejects(kind: str, value: str, tz: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_cadence(kind, value, tz)


def test_revise_cadence() -> None:
    cron = ScheduleCadence.cron("0 9 * * *")
    assert revise_cadence(cron) is None
    assert revise_cadence(cron, timezone=BERLIN) == ScheduleCadence.cron(
        "0 9 * * *", timezone=BERLIN
    )
    assert revise_cadence(cron, value="0 10 * * *").expression == "0 10 * * *"  # type: ignore[union-attr]
    with pytest.raises(InvalidInputError, match="new cadence value"):
        revise_cadence(cron, kind="interval")
    assert revise_cadence(cron, kind="interval", value="1h") == ScheduleCadence.interval(3600)


def test_cadence_dict_round_trip() -> None:
    for cadence in (
        ScheduleCadence.cron("0 9 * * 1-5", timezone=NY),
        ScheduleCadence.once("2026-01-01T00:00:00+02:00"),
        ScheduleCadence.interval(42),
    ):
        assert ScheduleCadence.from_dict(cadence.to_dict()) == cadence
    with pytest.raises(InvalidInputError, match="unknown cadence fields"):
        ScheduleCadence.from_dict({"kind": "interval", "every_secs": 5, "extra": 1})
