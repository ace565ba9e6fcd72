"""LLM tools over the scheduler: create, list, update, delete, history.

Handlers take ``(engine, args, ctx)``, use ``engine.schedules`` and act only on
``ctx.user_id``'s schedules - another user's schedule id reads as not found. The
dispatcher validates ``args`` against each schema and turns
:class:`~mindfile.errors.MindfileError` into a structured error for the model.
Times are returned in UTC and on the schedule's own wall clock (``*_local``).
"""

from __future__ import annotations

from typing import Any

from mindfile.errors import NotFoundError
from mindfile.scheduler._rules import MAX_GOAL_CHARS, MAX_NAME_CHARS, new_schedule
from mindfile.scheduler.cadence import format_in_timezone, parse_cadence, revise_cadence
from mindfile.scheduler.protocol import SchedulerStore
from mindfile.scheduler.types import (
    CADENCE_KINDS,
    NotificationPolicy,
    ScheduleDefinition,
    SchedulePatch,
    ScheduleRunRecord,
    ScheduleSearchFilters,
    ScheduleStatus,
)
from mindfile.tools._registry import ToolContext, ToolSpec, object_schema

__all__ = ["SCHEDULE_TOOLS"]

MAX_TOOL_PAGE = 50
#: Far beyond any user's schedule count (at most 500 by default); keeps offsets in range.
MAX_TOOL_OFFSET = 1_000_000

_ID = {"type": "string", "minLength": 1, "description": "The schedule's id (sched-...)."}
_GOAL = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_GOAL_CHARS,
    "description": "What to do each time the schedule fires, as an instruction to yourself.",
}
_CADENCE_TYPE = {
    "type": "string",
    "enum": list(CADENCE_KINDS),
    "description": "cron: recurring on a calendar; once: a single time; interval: every N.",
}
_CADENCE_VALUE = {
    "type": "string",
    "minLength": 1,
    "description": (
        "cron: five fields 'minute hour day month weekday', e.g. '0 9 * * 1-5' (weekdays "
        "09:00) or '@daily'; once: ISO-8601 time such as '2026-12-01T09:00' (read in "
        "`timezone` unless it has an offset) or a delay such as 'in 2h'; interval: a "
        "duration such as '30m', '1h30m' or '2 days'."
    ),
}
_TIMEZONE = {
    "type": "string",
    "description": "IANA time zone for cron and local times, e.g. 'Europe/Berlin'. Default UTC.",
}
_NAME = {"type": "string", "maxLength": MAX_NAME_CHARS, "description": "A short label."}
_POLICY = {
    "type": "string",
    "enum": [p.value for p in NotificationPolicy],
    "description": "When to notify the user about a run. Default always.",
}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": MAX_TOOL_PAGE, "default": 10}


def _store(engine: Any) -> SchedulerStore:
    store: SchedulerStore = engine.schedules
    return store


def _owned(store: SchedulerStore, schedule_id: str, user_id: str) -> ScheduleDefinition:
    schedule = store.get(schedule_id)
    if schedule.user_id != user_id:  # do not reveal that another user's id exists
        raise NotFoundError(f"no schedule {schedule_id!r}", schedule_id=schedule_id)
    return schedule


def _present(schedule: ScheduleDefinition) -> dict[str, Any]:
    out = schedule.to_dict()
    out.pop("user_id")
    out["next_run_local"] = format_in_timezone(schedule.next_run_at, schedule.cadence)
    out["last_run_local"] = format_in_timezone(schedule.last_run_at, schedule.cadence)
    return out


def _present_run(run: ScheduleRunRecord) -> dict[str, Any]:
    out = run.to_dict()
    out.pop("output")  # the summary is enough for a model; full output stays on disk
    return out


def schedule_create(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Create a schedule for the calling user, routed back to the calling session."""
    cadence = parse_cadence(args["cadence_type"], args["cadence_value"], args.get("timezone"))
    definition = new_schedule(
        user_id=ctx.user_id,
        goal=args["goal"],
        cadence=cadence,
        name=args.get("name"),
        notification_policy=args.get("notification_policy", NotificationPolicy.ALWAYS),
        channel_context_id=ctx.session_id,
    )
    created = _store(engine).create(definition)
    return {"schedule": _present(created)}


def schedule_list(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """List the calling user's schedules, soonest first."""
    filters = ScheduleSearchFilters(
        status=args.get("status"),
        query=args.get("query"),
        order="next_run",
        limit=int(args.get("limit", 10)),
        offset=int(args.get("offset", 0)),
    )
    page = _store(engine).search(ctx.user_id, filters)
    return {
        "schedules": [_present(s) for s in page.items],
        "total": page.total,
        "offset": page.offset,
        "next_offset": page.next_offset,
    }


def schedule_update(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Change fields of one of the calling user's schedules."""
    store = _store(engine)
    existing = _owned(store, args["schedule_id"], ctx.user_id)
    cadence = revise_cadence(
        existing.cadence,
        kind=args.get("cadence_type"),
        value=args.get("cadence_value"),
        timezone=args.get("timezone"),
    )
    patch = SchedulePatch(
        name=args.get("name"),
        goal=args.get("goal"),
        cadence=cadence,
        notification_policy=args.get("notification_policy"),
        status=args.get("status"),
    )
    return {"schedule": _present(store.update(existing.schedule_id, patch))}


def schedule_delete(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Delete one of the calling user's schedules and its history."""
    store = _store(engine)
    existing = _owned(store, args["schedule_id"], ctx.user_id)
    store.delete(existing.schedule_id)
    return {"deleted": True, "schedule_id": existing.schedule_id, "name": existing.name}


def schedule_history(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """The newest runs of one of the calling user's schedules."""
    store = _store(engine)
    existing = _owned(store, args["schedule_id"], ctx.user_id)
    runs = store.get_run_history(existing.schedule_id, int(args.get("limit", 10)))
    return {"schedule_id": existing.schedule_id, "runs": [_present_run(r) for r in runs]}


SCHEDULE_TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="schedule_create",
        description=(
            "Schedule future or recurring work for yourself (reminders, daily digests, "
            "periodic reviews). When it fires you will be run with `goal` as your task."
        ),
        parameters=object_schema(
            {
                "goal": _GOAL,
                "cadence_type": _CADENCE_TYPE,
                "cadence_value": _CADENCE_VALUE,
                "timezone": _TIMEZONE,
                "name": _NAME,
                "notification_policy": _POLICY,
            },
            ["goal", "cadence_type", "cadence_value"],
        ),
        handler=schedule_create,
    ),
    ToolSpec(
        name="schedule_list",
        description="List the user's schedules with their next run time, soonest first.",
        parameters=object_schema(
            {
                "status": {"type": "string", "enum": [s.value for s in ScheduleStatus]},
                "query": {"type": "string", "description": "Text to find in name or goal."},
                "limit": _LIMIT,
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_TOOL_OFFSET,
                    "default": 0,
                },
            },
            [],
        ),
        handler=schedule_list,
    ),
    ToolSpec(
        name="schedule_update",
        description=(
            "Change a schedule: goal, name, cadence, time zone, notification policy, or "
            "pause/resume it (status 'paused' / 'active'). Omitted fields stay as they are."
        ),
        parameters=object_schema(
            {
                "schedule_id": _ID,
                "goal": _GOAL,
                "name": _NAME,
                "cadence_type": _CADENCE_TYPE,
                "cadence_value": _CADENCE_VALUE,
                "timezone": _TIMEZONE,
                "notification_policy": _POLICY,
                "status": {"type": "string", "enum": ["active", "paused"]},
            },
            ["schedule_id"],
        ),
        handler=schedule_update,
    ),
    ToolSpec(
        name="schedule_delete",
        description="Delete a schedule and its run history for good.",
        parameters=object_schema({"schedule_id": _ID}, ["schedule_id"]),
        handler=schedule_delete,
    ),
    ToolSpec(
        name="schedule_history",
        description="Recent runs of a schedule, newest first, with status and output summary.",
        parameters=object_schema({"schedule_id": _ID, "limit": _LIMIT}, ["schedule_id"]),
        handler=schedule_history,
    ),
]
