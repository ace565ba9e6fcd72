"""Ready-made handlers for :class:`~mindfile.scheduler.runner.Runner`.

A real deployment passes its own agent loop as the handler. These two serve the CLI's
``mindfile schedule run-due``: :func:`record_goal` runs nothing and records the goal (a
dry run / audit trail), :func:`command_handler` hands each goal to an external command.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

from mindfile.errors import InvalidInputError
from mindfile.scheduler.runner import Handler, HandlerResult
from mindfile.scheduler.types import OUTPUT_SUMMARY_CHARS, ScheduleDefinition

__all__ = ["command_handler", "record_goal"]

# Full output is kept, but not without bound: a chatty command must not bloat the file.
MAX_OUTPUT_CHARS = 64_000


def record_goal(schedule: ScheduleDefinition) -> HandlerResult:
    """Execute nothing; the run's output is the goal itself."""
    return HandlerResult(output=schedule.goal)


def command_handler(command: Sequence[str], *, timeout_secs: float = 600.0) -> Handler:
    """A handler that runs ``command`` once per firing (no shell).

    The goal arrives on stdin and in ``MINDFILE_SCHEDULE_GOAL``, with
    ``MINDFILE_SCHEDULE_ID``, ``MINDFILE_SCHEDULE_NAME``, ``MINDFILE_USER_ID`` and
    ``MINDFILE_SCHEDULED_FOR``. Exit status 0 is success; the output is stdout, followed
    by stderr when the command failed. A time-out is a failure.
    """
    argv = list(command)
    if not argv:
        raise InvalidInputError("command is empty")

    def run(schedule: ScheduleDefinition) -> HandlerResult:
        env = {
            **os.environ,
            "MINDFILE_SCHEDULE_ID": schedule.schedule_id,
            "MINDFILE_SCHEDULE_NAME": schedule.name or "",
            "MINDFILE_SCHEDULE_GOAL": schedule.goal,
            "MINDFILE_USER_ID": schedule.user_id,
            "MINDFILE_SCHEDULED_FOR": schedule.next_run_at or "",
        }
        try:
            done = subprocess.run(
                argv,
                input=schedule.goal,
                capture_output=True,
                text=True,
                env=env,
                timeout=timeout_secs,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return HandlerResult(output=f"timed out after {timeout_secs}s", ok=False)
        except OSError as exc:
            return HandlerResult(output=f"cannot run {argv[0]!r}: {exc}", ok=False)
        output = done.stdout.rstrip()
        if done.returncode != 0:
            tail = done.stderr[-OUTPUT_SUMMARY_CHARS:]
            output = f"{output}\n[exit {done.returncode}] {tail}".strip()
        return HandlerResult(output=output[:MAX_OUTPUT_CHARS], ok=done.returncode == 0)

    return run
