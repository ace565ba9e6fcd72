"""Jobs survive a crash: a dead worker's jobs are recovered and another worker finishes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from backends import raw

from mindfile.jobs import JobPolicy
from mindfile.jobs.owner import default_worker_id
from mindfile.jobs.queue import claim
from mindfile.jobs.reconcile import reconcile

from ._support import DIMS, ControlledEmbedder, FakeClock, count, messages, open_store


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


CHILD = Path(__file__).with_name("_crash_child.py")


def test_crash_mid_job_then_resume(db_path: str, tmp_path: Path) -> None:
    marker = tmp_path / "claimed.txt"
    with open_store(db_path) as mem:
        mem.store_many(messages(5))
    child = subprocess.run(
        [sys.executable, str(CHILD), str(db_path), str(DIMS), str(marker), "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 1, child.stderr
    assert marker.read_text() == "3"  # it died holding 3 claimed jobs

    with open_store(db_path) as mem:
        held = mem.list_jobs(status="running")
        assert len(held) == 3
        assert all(j.claimed_by for j in held)
        assert count(mem, "chunks_vec") == 0
        # The holder is a process of this host that no longer exists: reconcile sees
        # it at once (issue 8), well before the 60 s lease would expire.
        check = mem.reconcile(repair=False)
        assert check.abandoned_jobs == 3
        assert not check.consistent

        # A new worker recovers the dead worker's jobs first and finishes all five.
        report = mem.run_jobs()
        assert (report.recovered, report.claimed, report.succeeded) == (3, 5, 5)
        jobs = mem.list_jobs()
        assert [j.status for j in jobs] == ["done"] * 5
        assert sorted(j.retry_count for j in jobs) == [0, 0, 1, 1, 1]
        recovered = [j for j in jobs if j.retry_count == 1]
        assert all("is gone" in (j.last_error or "") for j in recovered)
        # Every chunk has exactly one vector and the index holds each once.
        assert count(mem, "chunks_vec") == count(mem, "chunks") == 5
        assert mem.index.size() == 5
        assert mem.reconcile(repair=False).consistent


def test_reconcile_recovers_a_killed_workers_jobs(db_path: str, tmp_path: Path) -> None:
    with open_store(db_path) as mem:
        mem.store_many(messages(4))
    child = subprocess.run(
        [sys.executable, str(CHILD), str(db_path), str(DIMS), str(tmp_path / "m"), "4"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 1, child.stderr
    with open_store(db_path) as mem:
        assert len(mem.list_jobs(status="running")) == 4
        report = mem.reconcile(repair=True)
        assert report.abandoned_jobs == 4
        assert report.embedded == 0  # a background store leaves them to its worker
        assert [j.status for j in mem.list_jobs()] == ["pending"] * 4
        assert mem.run_jobs().succeeded == 4
        assert count(mem, "chunks_vec") == 4
        assert mem.reconcile(repair=False).consistent


def test_jobs_of_unverifiable_holders_wait_for_the_lease(db_path: Path) -> None:
    # Another host, or a custom worker id: liveness cannot be checked from here.
    clock = FakeClock()
    policy = JobPolicy(lease_seconds=30)
    with open_store(db_path) as mem:
        mem.store_many(messages(2))
        claim(mem.stores.jobs, now=clock(), limit=1, worker="elsewhere:1:1:1", policy=policy)
        claim(mem.stores.jobs, now=clock(), limit=1, worker="my-worker", policy=policy)
        assert reconcile(mem, repair=False, clock=clock).abandoned_jobs == 0
        assert mem.run_jobs(policy=policy, clock=clock).recovered == 0
        clock.advance(31)
        assert reconcile(mem, repair=False, clock=clock).abandoned_jobs == 2
        assert mem.run_jobs(policy=policy, clock=clock).recovered == 2


def test_jobs_of_a_live_worker_are_left_alone(db_path: Path) -> None:
    clock = FakeClock()
    policy = JobPolicy(lease_seconds=30)
    with open_store(db_path) as mem:
        mem.store_many(messages(2))
        # This very process holds the lease (a worker thread in the middle of a batch).
        claim(mem.stores.jobs, now=clock(), limit=1, worker=default_worker_id(), policy=policy)
        assert reconcile(mem, repair=True, clock=clock).abandoned_jobs == 0
        assert len(mem.list_jobs(status="running")) == 1


def test_workers_that_keep_dying_dead_letter_the_job(db_path: Path) -> None:
    clock = FakeClock()
    policy = JobPolicy(max_retries=1, lease_seconds=10)
    with open_store(db_path) as mem:
        mem.store("s1", 1, "a chunk that kills workers")
        for _ in range(2):  # claim and "die" twice
            assert (
                len(claim(mem.stores.jobs, now=clock(), limit=8, worker="w", policy=policy).jobs)
                == 1
            )
            clock.advance(11)
        report = mem.run_jobs(policy=policy, clock=clock)
        assert (report.recovered, report.dead_lettered, report.claimed) == (1, 1, 0)
        (job,) = mem.list_jobs()
        assert (job.status, job.retry_count) == ("failed", 2)


def test_an_interrupted_pass_hands_its_jobs_back(db_path: Path) -> None:
    class Interrupting(ControlledEmbedder):
        def embed_documents(self, texts):  # type: ignore[no-untyped-def]
            raise KeyboardInterrupt

    with open_store(db_path, Interrupting()) as mem:
        mem.store_many(messages(3))
        with pytest.raises(KeyboardInterrupt):
            mem.run_jobs()
        assert [(j.status, j.retry_count) for j in mem.list_jobs()] == [("pending", 0)] * 3


def test_a_replayed_job_is_a_no_op(db_path: Path) -> None:
    with open_store(db_path) as mem:
        mem.store_many(messages(2))
        mem.run_jobs()
        before = raw(mem).query("SELECT * FROM chunks_vec ORDER BY chunk_rowid")
        logged = count(mem, "chunks_vec_changes")
        # As if the job had been re-queued after its vector was written.
        raw(mem).execute("UPDATE memory_jobs SET status = 'pending'")
        assert mem.run_jobs().succeeded == 2
        assert raw(mem).query("SELECT * FROM chunks_vec ORDER BY chunk_rowid") == before
        assert count(mem, "chunks_vec_changes") == logged  # nothing rewritten


def test_a_lost_lease_discards_the_result(db_path: Path) -> None:
    policy = JobPolicy(lease_seconds=5)
    clock = FakeClock()
    with open_store(db_path) as mem:
        mem.store("s1", 1, "slow chunk")
        slow = claim(mem.stores.jobs, now=clock(), limit=8, worker="slow", policy=policy)
        clock.advance(6)  # the slow worker's lease runs out; another worker takes over
        assert mem.run_jobs(policy=policy, clock=clock).succeeded == 1
        from mindfile.jobs.queue import complete

        vectors = mem.embedder.embed_documents([j.text for j in slow.jobs])
        assert complete(mem.stores.jobs, slow, vectors, mem.embedder.model_id, clock()) == (0, 1)
        assert count(mem, "chunks_vec") == 1
