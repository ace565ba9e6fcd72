"""Rolling-summary state: the epoch compare-and-swap, across threads and processes."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest

import mindfile
from mindfile.errors import InvalidInputError, LimitExceededError
from mindfile.memory import SummaryState, SummaryWriteOutcome


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


ROUNDS = 15


def test_read_write_and_epochs(mem: mindfile.Mindfile) -> None:
    assert mem.read_summary_state("s1") is None
    first = mem.write_summary_state("s1", SummaryState("one", 3, epoch=99), expected_epoch=0)
    assert first == SummaryWriteOutcome(applied=True, epoch=1)
    state = mem.read_summary_state("s1")
    assert state is not None
    assert (state.summary, state.upper_sequence, state.epoch) == ("one", 3, 1)  # 99 ignored
    assert state.updated_at is not None
    assert mem.write_summary_state("s1", SummaryState("two", 5), 1) == SummaryWriteOutcome(True, 2)
    assert mem.read_summary_state("s1").summary == "two"  # type: ignore[union-attr]


def test_a_stale_write_is_discarded(mem: mindfile.Mindfile) -> None:
    mem.write_summary_state("s1", SummaryState("newer", 4), 0)
    outcome = mem.write_summary_state("s1", SummaryState("stale", 2), 0)
    assert outcome == SummaryWriteOutcome(applied=False, epoch=1)
    assert mem.read_summary_state("s1").summary == "newer"  # type: ignore[union-attr]
    assert mem.write_summary_state("s1", SummaryState("ahead", 2), 5).applied is False


def test_expected_epoch_above_zero_on_a_missing_session_writes_nothing(
    mem: mindfile.Mindfile,
) -> None:
    assert mem.write_summary_state("ghost", SummaryState("x", 1), 3) == SummaryWriteOutcome(
        False, 0
    )
    assert mem.list_sessions() == []
    assert mem.read_summary_state("ghost") is None


def test_first_write_creates_the_session_and_keeps_other_state(mem: mindfile.Mindfile) -> None:
    assert mem.write_summary_state("new", SummaryState("x", -1), 0).applied
    assert [s.session_id for s in mem.list_sessions()] == ["new"]
    mem.store("s1", 1, "hello")
    mem.write_scratchpad("s1", ["item"])
    mem.write_summary_state("s1", SummaryState("sum", 1), 0)
    assert mem.read_scratchpad("s1").items == ("item",)  # type: ignore[union-attr]
    mem.store("s1", 2, "monotonic check still sees last_sequence")


@pytest.mark.parametrize(
    ("state", "epoch", "error"),
    [
        ("not a state", 0, InvalidInputError),
        (SummaryState("x", -2), 0, InvalidInputError),
        (SummaryState("x", 1), -1, InvalidInputError),
        (SummaryState("x", 1), True, InvalidInputError),
        (SummaryState("x", 1), 1.0, InvalidInputError),
        (SummaryState("x" * 200_001, 1), 0, LimitExceededError),
        (SummaryState(123, 1), 0, InvalidInputError),  # type: ignore[arg-type]
    ],
)
def test_bad_writes_are_rejected(
    mem: mindfile.Mindfile, state: Any, epoch: Any, error: type
) -> None:
    with pytest.raises(error):
        mem.write_summary_state("s1", state, epoch)
    assert mem.list_sessions() == []


def test_two_threads_with_their_own_connections_race(db_path: Path) -> None:
    mindfile.open(db_path, embedder="hash").close()
    barrier = threading.Barrier(2)
    results: dict[int, list[bool]] = {0: [], 1: []}

    def worker(me: int) -> None:
        with mindfile.open(db_path) as mem:
            for round_ in range(ROUNDS):
                barrier.wait()
                outcome = mem.write_summary_state("s1", SummaryState(f"t{me}r{round_}", 0), round_)
                results[me].append(outcome.applied)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for round_ in range(ROUNDS):
        assert results[0][round_] + results[1][round_] == 1, f"round {round_}"
    with mindfile.open(db_path) as mem:
        state = mem.read_summary_state("s1")
        assert state is not None and state.epoch == ROUNDS
        assert state.summary.endswith(f"r{ROUNDS - 1}")


def _process_worker(db_path: str, me: int, barrier: Any, queue: Any) -> None:
    applied = []
    with mindfile.open(db_path) as mem:
        for round_ in range(ROUNDS):
            barrier.wait()
            outcome = mem.write_summary_state("s1", SummaryState(f"p{me}", 0), round_)
            applied.append(outcome.applied)
    queue.put((me, applied))


def test_two_processes_race(db_path: Path) -> None:
    mindfile.open(db_path, embedder="hash").close()
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    barrier = ctx.Barrier(2)
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_process_worker, args=(str(db_path), i, barrier, queue))
        for i in range(2)
    ]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    for round_ in range(ROUNDS):
        assert results[0][round_] + results[1][round_] == 1, f"round {round_}"
    with mindfile.open(db_path) as mem:
        assert mem.read_summary_state("s1").epoch == ROUNDS  # type: ignore[union-attr]
