"""Durable schedules on Mindfile's SQLite file, and a runner that fires them.

::

    import mindfile
    from mindfile.scheduler import Runner, ScheduleCadence

    mem = mindfile.open("agent.db")
    mem.schedules.add(
        user_id="u1",
        goal="Send me a digest of yesterday's notes",
        cadence=ScheduleCadence.cron("0 8 * * *", timezone="Europe/Berlin"),
    )
    Runner(mem, handler=my_agent_run).run_forever()

Modules: :mod:`~mindfile.scheduler.types` (value types), :mod:`~mindfile.scheduler.cadence`
(next-run math, validation, DST policy), :mod:`~mindfile.scheduler.store` (SQLite store),
:mod:`~mindfile.scheduler.runner` (leases, missed runs, failures, notifications),
:mod:`~mindfile.scheduler.tools` (LLM tools). See ``docs/scheduler.md``.
"""

from mindfile.scheduler.cadence import (
    cadence_value,
    format_in_timezone,
    next_run_for_cadence,
    parse_cadence,
    parse_duration,
    reschedule,
    revise_cadence,
    validate_cadence,
)
from mindfile.scheduler.handlers import command_handler, record_goal
from mindfile.scheduler.protocol import SchedulerStore
from mindfile.scheduler.runner import Handler, HandlerResult, Notifier, Runner, RunOutcome
from mindfile.scheduler.store import SqliteSchedulerStore, new_schedule
from mindfile.scheduler.types import (
    NotificationPolicy,
    RunStatus,
    ScheduleCadence,
    ScheduleClaim,
    ScheduleDefinition,
    SchedulePatch,
    ScheduleRunRecord,
    ScheduleSearchFilters,
    ScheduleSearchResult,
    ScheduleStatus,
)

__all__ = [
    "Handler",
    "HandlerResult",
    "NotificationPolicy",
    "Notifier",
    "RunOutcome",
    "RunStatus",
    "Runner",
    "ScheduleCadence",
    "ScheduleClaim",
    "ScheduleDefinition",
    "SchedulePatch",
    "ScheduleRunRecord",
    "ScheduleSearchFilters",
    "ScheduleSearchResult",
    "ScheduleStatus",
    "SchedulerStore",
    "SqliteSchedulerStore",
    "cadence_value",
    "command_handler",
    "format_in_timezone",
    "new_schedule",
    "next_run_for_cadence",
    "parse_cadence",
    "parse_duration",
    "record_goal",
    "reschedule",
    "revise_cadence",
    "validate_cadence",
]
