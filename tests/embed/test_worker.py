"""The bundled model's helper process: same vectors, never required, stopped on close."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import mindfile
from mindfile.embed._worker import MIN_CHARS, EmbedWorker, worker_allowed
from mindfile.embed.static import StaticEmbedder


def texts(n: int = 400) -> list[str]:
    words = Path(__file__).read_text("utf-8").split()
    out = [" ".join(words[i % len(words) : i % len(words) + 40]) + f" {i}" for i in range(n)]
    assert sum(map(len, out)) >= MIN_CHARS
    return out


def wait_running(worker: EmbedWorker, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not worker.running:
        assert time.monotonic() < deadline, "the helper process did not start"
        time.sleep(0.02)


@pytest.fixture
def embedder() -> Iterator[StaticEmbedder]:
    e = StaticEmbedder(worker=True)
    yield e
    e.close()


def test_large_batches_go_to_the_helper_with_the_same_vectors(embedder: StaticEmbedder) -> None:
    batch = texts()
    here = StaticEmbedder(worker=False).embed_documents(batch)
    first = embedder.embed_documents(batch)  # starts the helper, embeds in this thread
    np.testing.assert_array_equal(first, here)
    worker = embedder._worker
    assert worker is not None
    wait_running(worker)
    proc = worker._proc
    assert proc is not None
    there = embedder.embed_documents(batch)
    np.testing.assert_allclose(there, here, atol=1e-6)
    assert not np.array_equal(there, np.zeros_like(there))
    # Small batches stay in this thread: the helper is for bulk work.
    np.testing.assert_array_equal(embedder.embed_documents(batch[:3]), here[:3])
    embedder.close()
    assert proc.poll() is not None and worker._proc is None


def test_a_dead_helper_costs_nothing_but_time(embedder: StaticEmbedder) -> None:
    batch = texts()
    here = StaticEmbedder(worker=False).embed_documents(batch)
    embedder.embed_documents(batch)
    worker = embedder._worker
    assert worker is not None
    wait_running(worker)
    proc = worker._proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    got = embedder.embed_documents(batch)  # the pipe is broken: embedded here instead
    np.testing.assert_allclose(got, here, atol=1e-6)
    embedder.embed_documents(batch)  # and a new helper starts
    wait_running(worker)
    assert worker._proc is not None and worker._proc.pid != proc.pid
    np.testing.assert_allclose(embedder.embed_documents(batch), here, atol=1e-6)


def test_the_environment_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINDFILE_EMBED_WORKER", "0")
    assert not worker_allowed()
    assert StaticEmbedder()._worker is None
    monkeypatch.setenv("MINDFILE_EMBED_WORKER", "1")
    assert StaticEmbedder()._worker is not None or (os.cpu_count() or 1) < 2


def test_closing_the_store_stops_the_helper(tmp_path: Path) -> None:
    mem = mindfile.open(tmp_path / "m.db")
    embedder = mem.embedder
    assert isinstance(embedder, StaticEmbedder) and embedder._worker is not None
    mem.store_many([("s", i, t) for i, t in enumerate(texts())])
    wait_running(embedder._worker)
    proc = embedder._worker._proc
    assert proc is not None
    mem.close()
    assert proc.poll() is not None


def test_two_threads_share_the_helper_and_each_gets_its_own_rows(
    embedder: StaticEmbedder,
) -> None:
    batches = [texts(300), [t.upper() for t in texts(300)], texts(500)[200:]]
    here = [StaticEmbedder(worker=False).embed_documents(b) for b in batches]
    embedder.embed_documents(batches[0])  # starts the helper
    worker = embedder._worker
    assert worker is not None
    wait_running(worker)
    results: dict[tuple[int, int], np.ndarray | None] = {}
    start = threading.Barrier(2)

    def run(thread: int) -> None:
        start.wait()
        for round_ in range(6):
            which = (thread + round_) % len(batches)
            results[thread, round_] = worker.try_embed(batches[which], embedder.dimensions)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (thread, round_), got in results.items():
        # Two requests in flight at most: neither thread is turned away, answers in order.
        assert got is not None, (thread, round_)
        np.testing.assert_allclose(got, here[(thread + round_) % len(batches)], atol=1e-6)
