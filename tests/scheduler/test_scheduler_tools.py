"""The schedule_* LLM tools, called the way the dispatcher calls them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mindfile.errors import InvalidInputError, NotFoundError
from mindfile.scheduler import ScheduleRunRecord, ScheduleStatus, record_goal
from mindfile.scheduler.tools import SCHEDULE_TOOLS
from mindfile.tools._registry import ToolContext

CTX = ToolContext(user_id="u1", session_id="s1")
TOOLS = {spec.name: spec for spec in SCHEDULE_TOOLS}


def call(engine: Any, tool: str, ctx: ToolContext = CTX, **args: Any) -> Any:
    result = TOOLS[tool].handler(engine, args, ctx)
    json.dumps(result)  # tool results must be JSON-serialisable
    return result


def test_tool_specs() -> None:
    assert set(TOOLS) == {
        "schedule_create",
        "schedule_list",
        "schedule_update",
        "schedule_delete",
        "schedule_history",
    }
    for spec in SCHEDULE_TOOLS:
        assert spec.description and spec.parameters["type"] == "object"
        assert spec.parameters["additionalProperties"] is False
        assert set(spec.parameters["required"]) <= set(spec.parameters["properties"])


def test_create_list_update_history_delete(engine: Any) -> None:
    created = call(
        engine,
        "schedule_create",
        goal="Summarise yesterday's notes",
        cadence_type="cron",
        cadence_value="0 8 * * *",
        timezone="Europe/Berlin",
        name="digest",
        notification_policy="on_failure",
    )["schedule"]
    sid = created["schedule_id"]
    assert created["next_run_local"].endswith(("08:00 CET", "08:00 CEST"))
    assert created["channel_context_id"] == "s1" and "user_id" not in created

    listed = call(engine, "schedule_list", limit=5)
    assert listed["total"] == 1 and listed["schedules"][0]["schedule_id"] == sid
    assert listed["next_offset"] is None

    paused = call(engine, "schedule_update", schedule_id=sid, status="paused")["schedule"]
    assert paused["status"] == "paused"
    moved = call(engine, "schedule_update", schedule_id=sid, timezone="Asia/Tokyo")["schedule"]
    assert moved["cadence"] == {"kind": "cron", "timezone": "Asia/Tokyo", "expression": "0 8 * * *"}
    assert call(engine, "schedule_list", status="paused")["total"] == 1

    store = engine.schedules
    s = store.get(sid)
    store.record_run_and_reschedule(
        sid,
        ScheduleRunRecord.build(
            schedule_id=sid,
            started_at=s.created_at,
            finished_at=s.created_at,
            status="succeeded",  # type: ignore[arg-type]
            output=record_goal(s).output * 100,
        ),
        s.next_run_at,
    )
    history = call(engine, "schedule_history", schedule_id=sid)
    assert len(history["runs"]) == 1 and "output" not in history["runs"][0]
    assert len(history["runs"][0]["output_summary"]) == 500

    assert call(engine, "schedule_delete", schedule_id=sid) == {
        "deleted": True,
        "schedule_id": sid,
        "name": "digest",
    }
    assert call(engine, "schedule_list")["total"] == 0


def test_other_users_schedules_are_invisible(engine: Any) -> None:
    sid = call(engine, "schedule_create", goal="g", cadence_type="interval", cadence_value="1h")[
        "schedule"
    ]["schedule_id"]
    other = ToolContext(user_id="u2", session_id="s2")
    assert call(engine, "schedule_list", other)["total"] == 0
    for name in ("schedule_update", "schedule_delete", "schedule_history"):
        with pytest.raises(NotFoundError):
            call(engine, name, other, schedule_id=sid)
    assert engine.schedules.get(sid).status is ScheduleStatus.ACTIVE


@pytest.mark.parametrize(
    "args",
    [
        {"cadence_type": "cron", "cadence_value": "every morning"},
        {"cadence_type": "once", "cadence_value": "2001-01-01T00:00:00Z"},
        {"cadence_type": "interval", "cadence_value": "5s"},
        {"cadence_type": "cron", "cadence_value": "0 9 * * *", "timezone": "Nowhere/Else"},
        {"cadence_type": "cron", "cadence_value": "0 9 * * *", "notification_policy": "loud"},
    ],
)
def test_bad_input_is_an_mindfile_error(engine: Any, args: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError):
        call(engine, "schedule_create", goal="g", **args)


def test_update_cadence_kind_needs_value(engine: Any) -> None:
    sid = call(engine, "schedule_create", goal="g", cadence_type="interval", cadence_value="1h")[
        "schedule"
    ]["schedule_id"]
    with pytest.raises(InvalidInputError, match="new cadence value"):
        call(engine, "schedule_update", schedule_id=sid, cadence_type="cron")
    updated = call(
        engine, "schedule_update", schedule_id=sid, cadence_type="once", cadence_value="in 3h"
    )["schedule"]
    assert updated["cadence"]["kind"] == "once"


def test_schemas_are_valid_and_dispatch_validates(engine: Any) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from mindfile.tools import dispatch

    for spec in SCHEDULE_TOOLS:
        jsonschema.Draft202012Validator.check_schema(spec.parameters)
    ok = dispatch(
        engine,
        "schedule_create",
        '{"goal": "stretch", "cadence_type": "interval", "cadence_value": "2h"}',
        user_id="u1",
        session_id="s1",
    )
    assert ok["ok"] and ok["result"]["schedule"]["cadence"]["every_secs"] == 7200
    bad_enum = dispatch(
        engine,
        "schedule_create",
        {"goal": "g", "cadence_type": "weekly", "cadence_value": "x"},
        user_id="u1",
        session_id="s1",
    )
    assert bad_enum["error"]["code"] == "invalid_input"
    bad_cron = dispatch(
        engine,
        "schedule_create",
        {"goal": "g", "cadence_type": "cron", "cadence_value": "*/1 * * * * *"},
        user_id="u1",
        session_id="s1",
    )
    assert (
        bad_cron["error"]["code"] == "invalid_input"
        and "five fields" in bad_cron["error"]["message"]
    )
    missing = dispatch(
        engine, "schedule_delete", {"schedule_id": "sched-x"}, user_id="u1", session_id="s1"
    )
    assert missing["error"]["code"] == "not_found"
