"""The scheduler's SQL: named statements, row <-> dataclass mapping, search clauses.

Column lists are spelled once here so every SELECT, INSERT and ``RETURNING`` agrees
with :func:`schedule_from_row` / :func:`run_from_row` on column order.
"""

from __future__ import annotations

import json
from typing import Any

from mindfile.errors import StorageError
from mindfile.scheduler.types import (
    ScheduleCadence,
    ScheduleDefinition,
    ScheduleRunRecord,
    ScheduleSearchFilters,
)
from mindfile.storage.db import Row

SCHEDULE_COLUMNS = """
    schedule_id, user_id, name, goal, cadence_json, notification_policy, status,
    created_at, updated_at, next_run_at, last_run_at, last_run_status,
    consecutive_failures, channel_id, channel_context_id
"""
RUN_COLUMNS = """
    run_id, schedule_id, started_at, finished_at, status, output_summary, output,
    turn_count, cost, notified, scheduled_for
"""

INSERT_SCHEDULE = f"INSERT INTO schedules ({SCHEDULE_COLUMNS}) VALUES ({', '.join('?' * 15)})"
SELECT_SCHEDULE = f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE schedule_id = ?"
UPDATE_DEFINITION = """
UPDATE schedules
SET name = ?, goal = ?, cadence_json = ?, notification_policy = ?, status = ?,
    updated_at = ?, next_run_at = ?, consecutive_failures = ?, channel_id = ?,
    channel_context_id = ?
WHERE schedule_id = ?
"""
SELECT_DUE = f"""
SELECT {SCHEDULE_COLUMNS} FROM schedules
WHERE status = 'active' AND next_run_at <= ?
ORDER BY next_run_at, schedule_id
LIMIT ?
"""
CLAIM_DUE = f"""
UPDATE schedules
SET claim_token = :token, claimed_by = :runner, claim_expires_at = :expires
WHERE schedule_id IN (
    SELECT schedule_id FROM schedules
    WHERE status = 'active' AND next_run_at <= :now
      AND (claim_expires_at IS NULL OR claim_expires_at <= :now)
    ORDER BY next_run_at, schedule_id
    LIMIT :limit
)
RETURNING {SCHEDULE_COLUMNS}
"""
RENEW_CLAIM = """
UPDATE schedules SET claim_expires_at = ? WHERE schedule_id = ? AND claim_token = ?
"""
RELEASE_CLAIM = """
UPDATE schedules SET claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL
WHERE schedule_id = ? AND claim_token = ?
"""
INSERT_RUN = f"INSERT INTO schedule_runs ({RUN_COLUMNS}) VALUES ({', '.join('?' * 11)})"
# The claim is cleared only when the caller holds it; a manual record leaves a
# concurrent runner's lease alone.
RECORD_ON_SCHEDULE = """
UPDATE schedules
SET last_run_at = :started, last_run_status = :status,
    consecutive_failures = CASE WHEN :ok THEN 0 ELSE consecutive_failures + 1 END,
    next_run_at = :next_run_at, status = :new_status, updated_at = :updated_at,
    claim_token = CASE WHEN :token IS NULL THEN claim_token END,
    claimed_by = CASE WHEN :token IS NULL THEN claimed_by END,
    claim_expires_at = CASE WHEN :token IS NULL THEN claim_expires_at END
WHERE schedule_id = :schedule_id
"""
SELECT_RUNS = f"""
SELECT {RUN_COLUMNS} FROM schedule_runs WHERE schedule_id = ?
ORDER BY started_at DESC, rowid DESC LIMIT ?
"""
SELECT_RUN = f"SELECT {RUN_COLUMNS} FROM schedule_runs WHERE run_id = ?"
PRUNE_RUNS = """
DELETE FROM schedule_runs
WHERE schedule_id = :id AND run_id NOT IN (
    SELECT run_id FROM schedule_runs WHERE schedule_id = :id
    ORDER BY started_at DESC, rowid DESC LIMIT :keep
)
"""


def search_where(user_id: str, filters: ScheduleSearchFilters) -> tuple[str, list[Any]]:
    clauses, params = ["user_id = ?"], [user_id]
    if filters.status is not None:
        clauses.append("status = ?")
        params.append(filters.status.value)
    if filters.kind is not None:
        clauses.append("json_extract(cadence_json, '$.kind') = ?")
        params.append(filters.kind)
    if filters.channel_id is not None:
        clauses.append("channel_id = ?")
        params.append(filters.channel_id)
    if filters.query:
        pattern = "%" + _escape_like(filters.query) + "%"
        clauses.append("(name LIKE ? ESCAPE '\\' OR goal LIKE ? ESCAPE '\\')")
        params.extend([pattern, pattern])
    return " AND ".join(clauses), params


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def schedule_params(d: ScheduleDefinition) -> tuple[Any, ...]:
    return (
        d.schedule_id, d.user_id, d.name, d.goal, json.dumps(d.cadence.to_dict()),
        d.notification_policy.value, d.status.value, d.created_at, d.updated_at,
        d.next_run_at, d.last_run_at,
        None if d.last_run_status is None else d.last_run_status.value,
        d.consecutive_failures, d.channel_id, d.channel_context_id,
    )  # fmt: skip


def schedule_from_row(row: Row) -> ScheduleDefinition:
    try:
        cadence = ScheduleCadence.from_dict(json.loads(row[4]))
    except (ValueError, TypeError) as exc:
        raise StorageError(f"schedule {row[0]} has an unreadable cadence: {exc}") from exc
    return ScheduleDefinition(
        schedule_id=row[0], user_id=row[1], name=row[2], goal=row[3], cadence=cadence,
        notification_policy=row[5], status=row[6], created_at=row[7], updated_at=row[8],
        next_run_at=row[9], last_run_at=row[10], last_run_status=row[11],
        consecutive_failures=int(row[12]), channel_id=row[13], channel_context_id=row[14],
    )  # fmt: skip


def run_params(r: ScheduleRunRecord) -> tuple[Any, ...]:
    return (
        r.run_id, r.schedule_id, r.started_at, r.finished_at, r.status.value,
        r.output_summary, r.output, r.turn_count, float(r.cost), int(r.notified),
        r.scheduled_for,
    )  # fmt: skip


def run_from_row(row: Row) -> ScheduleRunRecord:
    return ScheduleRunRecord(
        run_id=row[0], schedule_id=row[1], started_at=row[2], finished_at=row[3],
        status=row[4], output_summary=row[5], output=row[6], turn_count=int(row[7]),
        cost=float(row[8]), notified=bool(row[9]), scheduled_for=row[10],
    )  # fmt: skip
