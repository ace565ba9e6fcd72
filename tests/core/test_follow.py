"""The derived indexes catch up once a bulk write pauses (mindfile._follow)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import mindfile
from mindfile import engine
from mindfile._follow import IdleFollower
from mindfile.retrieve import lexical
from mindfile.vector.ann_disk import MANIFEST
from mindfile.vector.exact_disk import ExactDiskIndex


def _wait_for(check, timeout: float = 20.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.02)
    return check()


def test_nothing_runs_below_the_threshold() -> None:
    calls: list[float] = []
    follower = IdleFollower(lambda: calls.append(time.monotonic()), idle=0.05, min_chunks=10)
    follower.wrote(9)
    time.sleep(0.3)
    assert calls == []
    follower.wrote(1)
    assert _wait_for(lambda: len(calls) == 1)
    follower.close()


def test_writes_postpone_the_follow_until_they_pause() -> None:
    calls: list[float] = []
    follower = IdleFollower(lambda: calls.append(time.monotonic()), idle=0.2, min_chunks=1)
    last = 0.0
    for _ in range(8):  # a write every 50 ms: never idle for 200 ms
        follower.wrote(5)
        last = time.monotonic()
        time.sleep(0.05)
    assert calls == []
    assert _wait_for(lambda: len(calls) == 1)
    assert calls[0] - last >= 0.2
    time.sleep(0.4)
    assert len(calls) == 1  # once per pause, not once per write
    follower.close()


def test_close_waits_for_a_follow_in_progress_and_stops_the_thread() -> None:
    started, release = threading.Event(), threading.Event()
    done: list[bool] = []

    def follow() -> None:
        started.set()
        release.wait(5)
        done.append(True)

    follower = IdleFollower(follow, idle=0.01, min_chunks=1)
    follower.wrote(1)
    assert started.wait(5)
    closer = threading.Thread(target=follower.close)
    closer.start()
    time.sleep(0.1)
    assert closer.is_alive()  # waiting for the follow
    release.set()
    closer.join(5)
    assert not closer.is_alive() and done == [True]
    follower.wrote(100)  # ignored after close
    time.sleep(0.1)
    assert follower.runs == 1


def test_a_failing_follow_is_logged_and_the_next_pause_tries_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    def follow() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("disk full")

    follower = IdleFollower(follow, idle=0.02, min_chunks=1)
    follower.wrote(1)
    assert _wait_for(lambda: follower.runs == 1)
    assert "catching the indexes up after writes failed" in caplog.text
    follower.wrote(1)
    assert _wait_for(lambda: follower.runs == 2)
    follower.close()


def test_a_bulk_ingest_is_indexed_and_published_before_anyone_searches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After store_many and a pause, with no search: the BM25 base and the exact index's
    generation are on disk, and a process opened next maps them (nothing to catch up)."""
    monkeypatch.setattr(lexical, "MERGE_MIN", 50)
    monkeypatch.setattr(ExactDiskIndex, "min_delta", 50)
    path = tmp_path / "bulk.db"
    mem = mindfile.open(path, embedder="hash", vector_index="exact")
    mem._follower = IdleFollower(mem._follow_indexes, idle=0.2, min_chunks=100)
    words = [
        "garden",
        "tomato",
        "lisbon",
        "porto",
        "train",
        "battery",
        "solar",
        "budget",
        "meeting",
        "sister",
    ]
    events = [
        (f"s{i % 7}", i // 7, f"{words[i % 10]} {words[(i * 3) % 10]} note {i}") for i in range(400)
    ]
    assert mem.store_many(events) == 400
    root = Path(f"{path}.index")
    assert _wait_for(lambda: (root / "exact" / MANIFEST).exists())
    assert _wait_for(lambda: mem.lexical.stats()["base_docs"] == 400)
    assert (root / "bm25" / MANIFEST).exists()
    assert _wait_for(lambda: mem._follower.runs >= 1)  # (it also classifies the chunks)
    mem.close()

    other = mindfile.open(path, embedder="hash", vector_index="exact")
    try:
        assert other.lexical.usable()  # maps the published base: no FTS5 fallback
        hits = other.search("lisbon porto", mode="hybrid", top_k=5)
        assert hits and all("lisbon" in h.text or "porto" in h.text for h in hits)
        assert other.lexical.stats()["delta_docs"] == 0
    finally:
        other.close()


def test_a_folder_sync_is_followed_like_a_bulk_write(tmp_path: Path) -> None:
    """sync() tells the follower how many chunks it added (and removed)."""
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(6):
        (notes / f"n{i}.md").write_text(f"# note {i}\n\nlisbon porto garden {i}\n")
    with mindfile.open(tmp_path / "s.db", embedder="hash") as mem:
        seen: list[int] = []
        mem._follower = IdleFollower(lambda: seen.append(1), idle=0.05, min_chunks=6)
        report = mem.sync([notes])
        assert report.chunks_added >= 6
        assert _wait_for(lambda: seen == [1])


def test_prepare_runs_once_before_the_first_follow() -> None:
    order: list[str] = []
    follower = IdleFollower(
        lambda: order.append("follow"),
        idle=0.05,
        min_chunks=1,
        prepare=lambda: order.append("prepare"),
    )
    follower.wrote(1)
    assert _wait_for(lambda: follower.runs == 1)
    follower.wrote(1)  # a second bulk write: a new thread, no second prepare
    assert _wait_for(lambda: follower.runs == 2)
    follower.close()
    assert order == ["prepare", "follow", "follow"]


def test_a_failing_prepare_is_logged_and_the_follow_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    def prepare() -> None:
        raise RuntimeError("no model")

    follower = IdleFollower(lambda: calls.append(1), idle=0.02, min_chunks=1, prepare=prepare)
    follower.wrote(1)
    assert _wait_for(lambda: follower.runs == 1)
    follower.close()
    assert calls == [1]
    assert "preparing the read path failed" in caplog.text


def test_a_bulk_write_prepares_the_first_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bundled model's token matcher (and the time parser) are loaded by the
    follower thread once a bulk write starts, not by the first search after it."""
    from mindfile.retrieve import token_match

    warmed: list[object] = []
    monkeypatch.setattr(engine, "warm_token_match", lambda db, matcher: warmed.append(db))
    mem = mindfile.open(tmp_path / "prep.db")
    try:
        assert getattr(mem.embedder, token_match._ATTRIBUTE, None) is None
        mem._follower = IdleFollower(
            mem._follow_indexes, idle=5.0, min_chunks=10, prepare=mem._prepare_reads
        )
        mem.store_many([("s", i, f"a note about the garden, number {i}") for i in range(20)])
        # Prepared while the writes have not paused yet (idle 5 s): before any follow.
        assert _wait_for(lambda: getattr(mem.embedder, token_match._ATTRIBUTE, None) is not None)
        assert isinstance(token_match.matcher_for(mem.embedder), token_match.TokenMatcher)
        assert _wait_for(lambda: warmed == [mem.db])  # token_match.warm_up, below
        assert mem._follower.runs == 0
    finally:
        mem.close()


def test_warm_up_teaches_the_word_pieces_of_the_newest_chunks(tmp_path: Path) -> None:
    """A fresh process's first search tokenises candidates without a stored set; the
    words of the newest chunks are learnt beforehand (and only those: ``texts``)."""
    from mindfile.retrieve import token_match

    with mindfile.open(tmp_path / "warm.db") as mem:
        mem.store_many([("s", i, f"note {i} about zebra{i} and the garden") for i in range(20)])
        matcher = token_match.matcher_for(mem.embedder)
        assert matcher is not None
        words = mem.embedder._ready().fast._cache  # type: ignore[attr-defined]
        words.clear()  # as in a process that did not embed these texts itself
        token_match.warm_up(mem.db, matcher, texts=5)
        assert b"zebra19" in words and b"zebra15" in words
        assert b"zebra14" not in words and b"zebra0" not in words
