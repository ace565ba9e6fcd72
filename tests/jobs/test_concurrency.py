"""Two workers never process one job; IndexWorker bounds concurrency and keeps up."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from mindfile.errors import ConfigError
from mindfile.jobs import IndexWorker, JobPolicy, run_jobs

from ._support import ControlledEmbedder, count, messages, open_store, status_counts


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


class SlowRecorder(ControlledEmbedder):
    """Records texts and how many calls overlap; each call takes ``delay`` seconds."""

    def __init__(self, delay: float = 0.01) -> None:
        super().__init__()
        self.delay = delay
        self.active = 0
        self.max_active = 0

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        with self._lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            time.sleep(self.delay)
            return super().embed_documents(texts)
        finally:
            with self._lock:
                self.active -= 1


def wait_for(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_two_workers_on_two_connections_never_double_process(db_path: Path) -> None:
    with open_store(db_path) as writer:
        writer.store_many(messages(60))
    recorder = SlowRecorder()
    stores = [open_store(db_path, recorder) for _ in range(2)]
    barrier = threading.Barrier(2)
    reports = []

    def work(index: int) -> None:
        barrier.wait()
        reports.append(run_jobs(stores[index], batch_size=4, worker_id=f"w{index}"))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        texts = Counter(recorder.embedded_texts)
        assert len(texts) == 60 and set(texts.values()) == {1}  # each chunk embedded once
        assert sum(r.succeeded for r in reports) == 60
        assert all(r.discarded == 0 for r in reports)
        assert all(r.claimed > 0 for r in reports)  # both really worked
        assert status_counts(stores[0]) == {"done": 60}
        assert count(stores[0], "chunks_vec") == 60
        for store in stores:
            assert store.index.size() == 60
    finally:
        for store in stores:
            store.close()


def test_index_worker_bounds_concurrency_and_drains_the_queue(db_path: Path) -> None:
    recorder = SlowRecorder(delay=0.02)
    with open_store(db_path, recorder) as mem:
        mem.store_many(messages(40))
        with IndexWorker(mem, concurrency=3, batch_size=2, poll_interval=0.05) as worker:
            wait_for(lambda: status_counts(mem) == {"done": 40})
            assert worker.running
        assert not worker.running
        assert recorder.max_active <= 3
        assert recorder.max_active >= 2  # it did run in parallel
        assert Counter(recorder.embedded_texts) == Counter(t for _, _, t in messages(40))
        report = worker.report()
        assert (report.succeeded, report.claimed) == (40, 40)
        assert mem.search("topic7", top_k=3).degraded is None


def test_index_worker_picks_up_new_writes(db_path: Path) -> None:
    with open_store(db_path) as mem:
        worker = IndexWorker(mem, concurrency=1, poll_interval=5.0).start()
        try:
            mem.store("s1", 1, "written while the worker sleeps")
            worker.notify()
            wait_for(lambda: count(mem, "chunks_vec") == 1, timeout=4.0)
        finally:
            worker.stop()


def test_index_worker_survives_an_embedder_outage(db_path: Path) -> None:
    embedder = ControlledEmbedder(down=True)
    policy = JobPolicy(backoff_base=0.01, backoff_cap=0.02, max_retries=1000)
    with open_store(db_path, embedder) as mem:
        mem.store_many(messages(5))
        with IndexWorker(mem, concurrency=2, poll_interval=0.01, policy=policy) as worker:
            wait_for(lambda: len(embedder.calls) >= 4)
            assert count(mem, "chunks_vec") == 0
            embedder.down = False
            wait_for(lambda: status_counts(mem) == {"done": 5})
        assert worker.report().retried >= 4


@pytest.mark.parametrize(
    "kwargs", [{"concurrency": 0}, {"poll_interval": 0}, {"concurrency": True}]
)
def test_bad_worker_options(db_path: Path, kwargs: dict[str, object]) -> None:
    with open_store(db_path) as mem, pytest.raises(ConfigError):
        IndexWorker(mem, **kwargs)  # type: ignore[arg-type]
