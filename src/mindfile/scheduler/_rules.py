"""The rules behind the store's writes: input limits, new definitions, re-planning.

Kept apart from the SQL so the policy (what ``update`` does to ``next_run_at``, which
inputs are too long) reads in one place and can be shared by any store.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime

from mindfile.errors import InvalidInputError, LimitExceededError
from mindfile.scheduler._checks import MAX_REF_CHARS, check_str
from mindfile.scheduler._time import TimeLike, iso, iso_or_none, now_utc, to_utc
from mindfile.scheduler.cadence import next_run_for_cadence, validate_cadence
from mindfile.scheduler.types import (
    NotificationPolicy,
    ScheduleCadence,
    ScheduleDefinition,
    SchedulePatch,
    ScheduleStatus,
    coerce_enum,
)

__all__ = [
    "MAX_GOAL_CHARS",
    "MAX_NAME_CHARS",
    "MAX_PAGE_SIZE",
    "check_channel",
    "check_limit",
    "check_name",
    "check_text",
    "new_schedule",
    "plan_update",
]

MAX_GOAL_CHARS = 4_000
MAX_NAME_CHARS = 200
MAX_PAGE_SIZE = 200


def new_schedule(
    *,
    user_id: str,
    goal: str,
    cadence: ScheduleCadence,
    name: str | None = None,
    notification_policy: NotificationPolicy | str = NotificationPolicy.ALWAYS,
    channel_id: str | None = None,
    channel_context_id: str | None = None,
    now: TimeLike | None = None,
) -> ScheduleDefinition:
    """A fresh active definition with a ``sched-…`` id, ready for ``store.create``."""
    stamp = iso(now_utc() if now is None else now)
    return ScheduleDefinition(
        schedule_id=f"sched-{uuid.uuid4()}",
        user_id=user_id,
        goal=goal,
        cadence=cadence,
        name=name or None,
        notification_policy=coerce_enum(
            NotificationPolicy, notification_policy, "notification_policy"
        ),
        created_at=stamp,
        updated_at=stamp,
        channel_id=channel_id,
        channel_context_id=channel_context_id,
    )


def plan_update(
    existing: ScheduleDefinition, patch: SchedulePatch, now: datetime, min_interval_secs: int
) -> ScheduleDefinition:
    """The definition after ``patch``.

    A new cadence is validated and re-plans ``next_run_at`` from ``now``. Resuming
    (to ``active`` from another status) resets the failure count and, if the stored
    ``next_run_at`` has passed, plans the next firing after ``now`` - missed firings
    are not caught up. ``completed`` clears ``next_run_at``.
    """
    if patch.goal is not None:
        check_text(patch.goal, "goal", MAX_GOAL_CHARS)
    check_name(patch.name)
    check_channel(patch.channel_id, "channel_id")
    check_channel(patch.channel_context_id, "channel_context_id")
    cadence = patch.cadence or existing.cadence
    status = patch.status or existing.status
    next_run_at, failures = existing.next_run_at, existing.consecutive_failures
    if patch.cadence is not None:
        validate_cadence(patch.cadence, min_interval_secs, now=now)
        next_run_at = iso_or_none(next_run_for_cadence(cadence, now))
    if status is ScheduleStatus.ACTIVE and existing.status is not ScheduleStatus.ACTIVE:
        failures = 0
        if next_run_at is None or to_utc(next_run_at) <= now:
            next_run_at = iso_or_none(next_run_for_cadence(cadence, now))
        if next_run_at is None:
            raise InvalidInputError("the one-shot time has passed; give a new time to resume")
    if status is ScheduleStatus.COMPLETED:
        next_run_at = None
    name = existing.name if patch.name is None else (patch.name or None)
    return replace(
        existing,
        name=name,
        goal=existing.goal if patch.goal is None else patch.goal,
        cadence=cadence,
        notification_policy=patch.notification_policy or existing.notification_policy,
        status=status,
        updated_at=iso(now),
        next_run_at=next_run_at,
        consecutive_failures=failures,
        channel_id=patch.channel_id if patch.channel_id is not None else existing.channel_id,
        channel_context_id=(
            patch.channel_context_id
            if patch.channel_context_id is not None
            else existing.channel_context_id
        ),
    )


def check_text(value: str, what: str, limit: int) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{what} must be a non-empty string")
    if len(value) > limit:
        raise LimitExceededError(f"{what} is longer than {limit} characters", limit=limit)
    check_str(value, what)


def check_name(name: str | None) -> None:
    if name is None:
        return
    check_str(name, "name")
    if len(name) > MAX_NAME_CHARS:
        raise LimitExceededError(f"name is longer than {MAX_NAME_CHARS} characters")


def check_channel(value: str | None, what: str) -> None:
    """An optional channel reference: at most ``MAX_REF_CHARS`` characters, storable."""
    if value is None:
        return
    check_str(value, what)
    if len(value) > MAX_REF_CHARS:
        raise LimitExceededError(f"{what} is longer than {MAX_REF_CHARS} characters")


def check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInputError("limit must be a positive integer")
    if limit > 10_000:
        raise LimitExceededError("limit must be at most 10000")
