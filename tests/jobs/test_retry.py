"""Retries with exponential backoff, the dead letter, and the queue's views."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from backends import raw

from mindfile.errors import ConfigError, InvalidInputError
from mindfile.jobs import JobPolicy, queue_status
from mindfile.jobs.queue import iso

from ._support import START, ControlledEmbedder, FakeClock, messages, open_store, status_counts


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


def job_row(mem: object, job_id: int = 1) -> tuple[str, int, str, str | None]:
    row = raw(mem).query_one(  # type: ignore[attr-defined]
        "SELECT status, retry_count, next_retry_at, last_error FROM memory_jobs WHERE job_id = ?",
        (job_id,),
    )
    assert row is not None
    return row[0], row[1], row[2], row[3]


def test_backoff_doubles_and_is_capped() -> None:
    policy = JobPolicy(backoff_base=2.0, backoff_cap=30.0)
    assert [policy.backoff(n) for n in range(1, 7)] == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert policy.backoff(10_000) == 30.0  # no overflow
    jittered = JobPolicy(backoff_base=10.0, jitter=0.5)
    assert jittered.backoff(1, random=0.0) == 10.0
    assert jittered.backoff(1, random=0.999) == pytest.approx(5.005)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_retries": -1},
        {"max_retries": 1.5},
        {"backoff_base": -1.0},
        {"backoff_cap": float("inf")},
        {"lease_seconds": 0},
        {"jitter": 2.0},
        {"stop_after_failures": 0},
    ],
)
def test_bad_policies_are_config_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        JobPolicy(**kwargs)  # type: ignore[arg-type]


def test_fails_twice_then_succeeds_with_backoff_timings(db_path: Path) -> None:
    embedder = ControlledEmbedder(fail_next=2)
    clock = FakeClock()
    policy = JobPolicy(backoff_base=10.0, max_retries=5)
    with open_store(db_path, embedder) as mem:
        mem.store("s1", 1, "remember the milk")
        first = mem.run_jobs(policy=policy, clock=clock)
        assert (first.claimed, first.retried, first.succeeded) == (1, 1, 0)
        assert first.last_error is not None and "timed out" in first.last_error
        status, retries, due, error = job_row(mem)
        assert (status, retries, due) == ("pending", 1, iso(START + timedelta(seconds=10)))
        assert error is not None and "timed out" in error

        clock.advance(9.9)  # not due yet: nothing is claimed, nothing is called
        assert mem.run_jobs(policy=policy, clock=clock).claimed == 0
        assert len(embedder.calls) == 1

        clock.advance(0.1)
        second = mem.run_jobs(policy=policy, clock=clock)
        assert (second.claimed, second.retried) == (1, 1)
        assert job_row(mem)[1:3] == (2, iso(clock.now + timedelta(seconds=20)))

        clock.advance(20)
        third = mem.run_jobs(policy=policy, clock=clock)
        assert (third.claimed, third.succeeded) == (1, 1)
        assert job_row(mem)[:2] == ("done", 2)
        assert len(embedder.calls) == 3
        assert mem.search("milk", mode="vector").degraded is None


def test_always_failing_embedder_dead_letters_after_max_retries(db_path: Path) -> None:
    embedder = ControlledEmbedder(down=True)
    clock = FakeClock()
    policy = JobPolicy(backoff_base=1.0, backoff_cap=4.0, max_retries=3)
    with open_store(db_path, embedder) as mem:
        mem.store("s1", 1, "a doomed chunk")
        dues: list[str] = []
        for attempt in range(1, 5):
            report = mem.run_jobs(policy=policy, clock=clock)
            assert report.claimed == 1, attempt
            status, retries, due, _ = job_row(mem)
            assert retries == attempt
            dues.append(due)
            if attempt <= 3:
                assert status == "pending" and report.retried == 1
                clock.now = datetime.fromisoformat(due)
            else:
                assert status == "failed" and report.dead_lettered == 1
        offsets = [
            (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()
            for a, b in zip([iso(START), *dues], dues[:3], strict=False)
        ]
        assert offsets == [1.0, 2.0, 4.0]  # 1, 2, then 4 (the cap)
        assert len(embedder.calls) == 4  # 1 + max_retries attempts, then never again
        clock.advance(3600)
        assert mem.run_jobs(policy=policy, clock=clock).claimed == 0
        assert len(embedder.calls) == 4
        # Nothing is lost: the chunk is still there, findable by full text.
        hits = mem.search("doomed")
        assert [h.text for h in hits] == ["a doomed chunk"]
        assert hits.degraded is not None and "1 failed" in hits.degraded


def test_retry_failed_jobs_requeues_the_dead_letter(db_path: Path) -> None:
    embedder = ControlledEmbedder(down=True)
    policy = JobPolicy(max_retries=0)
    with open_store(db_path, embedder) as mem:
        mem.store_many(messages(3))
        assert mem.run_jobs(policy=policy).dead_lettered == 3
        assert status_counts(mem) == {"failed": 3}
        assert [j.status for j in mem.list_jobs(status="failed")] == ["failed"] * 3
        embedder.down = False
        assert mem.retry_failed_jobs() == 3
        assert status_counts(mem) == {"pending": 3}
        assert mem.run_jobs(policy=policy).succeeded == 3


def test_a_retried_job_runs_alone_so_one_bad_chunk_cannot_sink_its_batch(
    db_path: Path,
) -> None:
    class Picky(ControlledEmbedder):
        def embed_documents(self, texts):  # type: ignore[no-untyped-def]
            if any("poison" in t for t in texts):
                self.calls.append(list(texts))
                raise ValueError("provider rejected the input")
            return super().embed_documents(texts)

    embedder = Picky()
    clock = FakeClock()
    policy = JobPolicy(max_retries=2, backoff_base=1.0)
    with open_store(db_path, embedder) as mem:
        mem.store_many([("s1", 1, "fine one"), ("s1", 2, "poison pill"), ("s1", 3, "fine two")])
        report = mem.run_jobs(policy=policy, clock=clock)
        assert (report.claimed, report.retried) == (3, 3)
        for _ in range(3):
            clock.advance(60)
            mem.run_jobs(policy=policy, clock=clock)
        assert status_counts(mem) == {"done": 2, "failed": 1}
        failed = mem.list_jobs(status="failed")
        assert len(failed) == 1 and "rejected" in (failed[0].last_error or "")
        assert embedder.calls[1:] and all(len(call) == 1 for call in embedder.calls[1:])


def test_a_pass_stops_early_when_the_embedder_keeps_failing(db_path: Path) -> None:
    embedder = ControlledEmbedder(down=True)
    policy = JobPolicy(stop_after_failures=2, max_retries=9)
    with open_store(db_path, embedder) as mem:
        mem.store_many(messages(10))
        report = mem.run_jobs(batch_size=2, policy=policy, clock=FakeClock())
        assert report.stopped_early
        assert (report.claimed, report.batches, report.retried) == (4, 2, 4)
        assert status_counts(mem) == {"pending": 10}


def test_max_jobs_bounds_a_pass(db_path: Path) -> None:
    with open_store(db_path) as mem:
        mem.store_many(messages(10))
        report = mem.run_jobs(max_jobs=3, batch_size=2)
        assert (report.claimed, report.batches) == (3, 2)
        assert status_counts(mem) == {"done": 3, "pending": 7}
        assert mem.run_jobs(max_jobs=0).claimed == 0
        with pytest.raises(InvalidInputError):
            mem.run_jobs(batch_size=0)
        with pytest.raises(InvalidInputError):
            mem.run_jobs(max_jobs=-1)


def test_job_status_and_listing(db_path: Path) -> None:
    embedder = ControlledEmbedder(fail_next=1)
    clock = FakeClock(datetime(2000, 1, 1, tzinfo=START.tzinfo))  # before the jobs exist
    with open_store(db_path, embedder) as mem:
        mem.store_many(messages(2))
        fresh = mem.job_status(clock=clock)
        assert (fresh.pending, fresh.due, fresh.backlog) == (2, 0, 2)
        clock.now = START
        assert mem.job_status(clock=clock).due == 2
        mem.run_jobs(max_jobs=1, policy=JobPolicy(backoff_base=30), clock=clock)
        state = queue_status(mem.stores.jobs, clock)
        assert (state.pending, state.done, state.failed, state.due) == (2, 0, 0, 1)
        assert state.next_retry_at == iso(clock.now + timedelta(seconds=30))
        assert state.oldest_pending_at is not None
        assert state.to_dict()["backlog"] == 2
        jobs = mem.list_jobs()
        assert [j.retry_count for j in jobs] == [1, 0]
        assert jobs[0].chunk_id.startswith("ch_") and jobs[0].session_id == "s1"
        assert jobs[0].to_dict()["last_error"].startswith("embedding failed")
        with pytest.raises(InvalidInputError):
            mem.list_jobs(status="stuck")


def test_prune_deletes_only_old_done_jobs(db_path: Path) -> None:
    with open_store(db_path) as mem:
        mem.store_many(messages(3))
        mem.run_jobs(max_jobs=2)
        assert mem.prune_jobs() == 0  # done just now
        assert mem.prune_jobs(older_than_seconds=0) == 2
        assert status_counts(mem) == {"pending": 1}
