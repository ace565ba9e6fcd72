"""``mindfile schedule``: add, list, show, update, delete, history, run-due.

``run-due`` fires what is due once and exits, so a system cron or timer can drive it::

    * * * * *  mindfile schedule run-due --db ~/agent.db --command 'my-agent --stdin'

Without ``--command`` it executes nothing and records each goal as the run's output (a
dry run that still advances the schedules). An agent embedding Mindfile should instead
run :class:`mindfile.scheduler.Runner` with its own handler.
"""

from __future__ import annotations

import contextlib
import importlib
import shlex
from collections.abc import Iterator
from typing import Any

import click

from mindfile.cli._common import db_option, emit, json_option, run
from mindfile.errors import InvalidInputError
from mindfile.scheduler import (
    NotificationPolicy,
    Runner,
    ScheduleCadence,
    ScheduleDefinition,
    SchedulePatch,
    SchedulerStore,
    ScheduleSearchFilters,
    ScheduleStatus,
    command_handler,
    format_in_timezone,
    new_schedule,
    parse_cadence,
    record_goal,
    revise_cadence,
)

__all__ = ["schedule"]

_POLICIES = [p.value for p in NotificationPolicy]


def open_engine(db_path: str) -> Any:
    """Open the memory store at ``db_path`` (imported late: keeps ``--help`` fast)."""
    return importlib.import_module("mindfile").open(db_path)


@contextlib.contextmanager
def _store(db_path: str) -> Iterator[SchedulerStore]:
    engine = open_engine(db_path)
    try:
        yield engine.schedules
    finally:
        close = getattr(engine, "close", None)
        if callable(close):
            close()


def user_option(func: Any) -> Any:
    """``--user ID`` (env ``MINDFILE_USER``, default ``default``)."""
    return click.option(
        "--user",
        "user_id",
        envvar="MINDFILE_USER",
        default="default",
        show_default=True,
        help="Whose schedules (env MINDFILE_USER).",
    )(func)


def cadence_options(func: Any) -> Any:
    """``--cron``, ``--at``, ``--every`` and ``--tz``."""
    options = [
        click.option("--cron", help="Five-field cron expression, e.g. '0 9 * * 1-5'."),
        click.option("--at", help="One-shot time (ISO-8601; local to --tz without offset)."),
        click.option("--every", help="Interval, e.g. '90s', '15m', '1h30m', '2 days'."),
        click.option("--tz", "timezone", help="IANA time zone (default UTC)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _kind_and_value(cron: str | None, at: str | None, every: str | None) -> tuple[str, str] | None:
    given = [(k, v) for k, v in (("cron", cron), ("once", at), ("interval", every)) if v]
    if len(given) > 1:
        raise InvalidInputError("give only one of --cron, --at, --every")
    return given[0] if given else None


def _line(s: ScheduleDefinition) -> str:
    when = format_in_timezone(s.next_run_at, s.cadence) or "-"
    label = s.name or s.goal
    label = label if len(label) <= 48 else label[:47] + "…"
    return f"{s.schedule_id}  {s.status.value:<9}  next {when:<22}  {_describe(s.cadence)}  {label}"


def _describe(c: ScheduleCadence) -> str:
    if c.kind == "cron":
        return f"cron '{c.expression}' {c.timezone}"
    if c.kind == "once":
        return f"once {format_in_timezone(c.at, c)}"
    return f"every {c.every_secs}s"


def _show(s: ScheduleDefinition) -> None:
    data = s.to_dict()
    data["cadence"] = _describe(s.cadence)
    data["next_run_local"] = format_in_timezone(s.next_run_at, s.cadence)
    data["last_run_local"] = format_in_timezone(s.last_run_at, s.cadence)
    for key, value in data.items():
        click.echo(f"{key:>22}: {'-' if value is None else value}")


@click.group("schedule")
def schedule() -> None:
    """Durable schedules: reminders and recurring agent work."""


@schedule.command("add")
@db_option
@json_option
@user_option
@click.option("--goal", required=True, help="What the agent should do when it fires.")
@cadence_options
@click.option("--name", help="A short label.")
@click.option("--notify", type=click.Choice(_POLICIES), default="always", show_default=True)
def add(
    db_path: str,
    as_json: bool,
    user_id: str,
    goal: str,
    cron: str | None,
    at: str | None,
    every: str | None,
    timezone: str | None,
    name: str | None,
    notify: str,
) -> None:
    """Create a schedule (exactly one of --cron, --at, --every)."""
    with run(as_json):
        given = _kind_and_value(cron, at, every)
        if given is None:
            raise InvalidInputError("give one of --cron, --at, --every")
        cadence = parse_cadence(given[0], given[1], timezone)
        definition = new_schedule(
            user_id=user_id, goal=goal, cadence=cadence, name=name, notification_policy=notify
        )
        with _store(db_path) as store:
            created = store.create(definition)
        emit(created, as_json, lambda: click.echo(_line(created)))


@schedule.command("list")
@db_option
@json_option
@user_option
@click.option("--status", type=click.Choice([s.value for s in ScheduleStatus]))
@click.option("--kind", type=click.Choice(["cron", "once", "interval"]))
@click.option("--query", help="Text to find in name or goal.")
@click.option("--order", type=click.Choice(["created", "next_run"]), default="created")
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--offset", type=int, default=0, show_default=True)
def list_(
    db_path: str,
    as_json: bool,
    user_id: str,
    status: str | None,
    kind: Any,
    query: str | None,
    order: Any,
    limit: int,
    offset: int,
) -> None:
    """List a user's schedules, a page at a time."""
    with run(as_json):
        filters = ScheduleSearchFilters(
            status=ScheduleStatus(status) if status else None,
            kind=kind,
            query=query,
            order=order,
            limit=limit,
            offset=offset,
        )
        with _store(db_path) as store:
            page = store.search(user_id, filters)

        def human() -> None:
            for item in page.items:
                click.echo(_line(item))
            shown = f"{offset + 1}-{offset + len(page.items)}" if page.items else "none"
            click.echo(f"({shown} of {page.total})")

        emit(page, as_json, human)


@schedule.command("show")
@db_option
@json_option
@click.argument("schedule_id")
def show(db_path: str, as_json: bool, schedule_id: str) -> None:
    """Show one schedule."""
    with run(as_json):
        with _store(db_path) as store:
            found = store.get(schedule_id)
        emit(found, as_json, lambda: _show(found))


@schedule.command("update")
@db_option
@json_option
@click.argument("schedule_id")
@click.option("--goal")
@click.option("--name", help="New label ('' clears it).")
@cadence_options
@click.option("--notify", type=click.Choice(_POLICIES))
@click.option("--pause", is_flag=True, help="Stop firing until resumed.")
@click.option("--resume", is_flag=True, help="Fire again (missed firings are skipped).")
def update(
    db_path: str,
    as_json: bool,
    schedule_id: str,
    goal: str | None,
    name: str | None,
    cron: str | None,
    at: str | None,
    every: str | None,
    timezone: str | None,
    notify: str | None,
    pause: bool,
    resume: bool,
) -> None:
    """Change a schedule; options not given stay as they are."""
    with run(as_json):
        if pause and resume:
            raise InvalidInputError("give --pause or --resume, not both")
        given = _kind_and_value(cron, at, every)
        status = ScheduleStatus.PAUSED if pause else ScheduleStatus.ACTIVE if resume else None
        with _store(db_path) as store:
            existing = store.get(schedule_id)
            cadence = revise_cadence(
                existing.cadence,
                kind=given[0] if given else None,
                value=given[1] if given else None,
                timezone=timezone,
            )
            patch = SchedulePatch(
                goal=goal,
                name=name,
                cadence=cadence,
                notification_policy=NotificationPolicy(notify) if notify else None,
                status=status,
            )
            updated = store.update(schedule_id, patch)
        emit(updated, as_json, lambda: click.echo(_line(updated)))


@schedule.command("delete")
@db_option
@json_option
@click.argument("schedule_id")
def delete(db_path: str, as_json: bool, schedule_id: str) -> None:
    """Delete a schedule and its run history."""
    with run(as_json):
        with _store(db_path) as store:
            gone = store.delete(schedule_id)
        emit(
            {"deleted": True, "schedule_id": gone.schedule_id},
            as_json,
            lambda: click.echo(f"deleted {gone.schedule_id}"),
        )


@schedule.command("history")
@db_option
@json_option
@click.argument("schedule_id")
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--full", is_flag=True, help="Print whole outputs, not summaries.")
def history(db_path: str, as_json: bool, schedule_id: str, limit: int, full: bool) -> None:
    """Recent runs of a schedule, newest first."""
    with run(as_json):
        with _store(db_path) as store:
            runs = store.get_run_history(schedule_id, limit)

        def human() -> None:
            for r in runs:
                text = (r.output if full else r.output_summary) or ""
                flag = " notified" if r.notified else ""
                click.echo(f"{r.started_at}  {r.status.value:<9}{flag}  {r.run_id}")
                if text:
                    click.echo("    " + text.replace("\n", "\n    "))
            if not runs:
                click.echo("(no runs)")

        emit(runs, as_json, human)


@schedule.command("run-due")
@db_option
@json_option
@click.option("--command", "command", help="Run this for each firing (goal on stdin).")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Per run, secs.")
@click.option("--limit", type=int, default=100, show_default=True, help="Most runs this pass.")
@click.option("--lease", type=float, default=300.0, show_default=True, help="Lease, secs.")
@click.option("--max-failures", type=int, default=3, show_default=True)
@click.option("--keep-runs", type=int, default=100, show_default=True)
def run_due(
    db_path: str,
    as_json: bool,
    command: str | None,
    timeout: float,
    limit: int,
    lease: float,
    max_failures: int,
    keep_runs: int,
) -> None:
    """Fire every due schedule once, then exit.

    Without --command nothing is executed: each run records its goal as output.
    """
    with run(as_json):
        handler = command_handler(shlex.split(command), timeout_secs=timeout) if command else None
        with _store(db_path) as store:
            runner = Runner(
                store,
                handler or record_goal,
                lease_secs=lease,
                max_consecutive_failures=max_failures,
                keep_runs=keep_runs,
            )
            outcomes = runner.run_due(limit=limit)

        def human() -> None:
            for o in outcomes:
                state = o.run.status.value if o.recorded else f"not recorded ({o.error})"
                click.echo(f"{o.schedule_id}  {o.scheduled_for}  {state}")
            click.echo(f"{len(outcomes)} run(s)")

        emit(outcomes, as_json, human)
