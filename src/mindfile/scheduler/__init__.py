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
(next-run math, validation, DST policy), :mod:`~mindfile.storage.schedules` (SQLite store),
:mod:`~mindfile.scheduler.runner` (leases, missed runs, failures, notifications),
:mod:`~mindfile.scheduler.tools` (LLM tools). See ``docs/scheduler.md``.
"""

from typing import TYPE_CHECKING, Any

from mindfile.scheduler._rules import new_schedule
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

if TYPE_CHECKING:
    from mindfile.storage.schedules import SqliteSchedulerStore

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


def __getattr__(name: str) -> Any:
    # The SQLite store lives in mindfile.storage (issue 13) and imports this package's
    # rules and types, so it is imported when first named, not while this package loads.
    if name == "SqliteSchedulerStore":
        from mindfile.storage.schedules import SqliteSchedulerStore

        return SqliteSchedulerStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
