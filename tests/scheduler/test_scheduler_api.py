"""The public surface of ``mindfile.scheduler``."""

from __future__ import annotations

import dataclasses

import mindfile.scheduler as scheduler


def test_all_is_importable_and_sorted() -> None:
    assert scheduler.__all__ == sorted(scheduler.__all__)
    for name in scheduler.__all__:
        assert getattr(scheduler, name) is not None, name


def test_results_are_frozen_dataclasses_with_to_dict() -> None:
    for name in (
        "ScheduleCadence",
        "ScheduleDefinition",
        "SchedulePatch",
        "ScheduleRunRecord",
        "ScheduleSearchResult",
        "ScheduleClaim",
        "RunOutcome",
    ):
        cls = getattr(scheduler, name)
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, name
        assert callable(getattr(cls, "to_dict", None)), name


def test_enums_are_strings() -> None:
    assert scheduler.ScheduleStatus.ACTIVE == "active"
    assert scheduler.NotificationPolicy.ON_FAILURE == "on_failure"
    assert scheduler.RunStatus.FAILED == "failed"
