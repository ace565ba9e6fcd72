"""A bulk ingest's indexes are published by a helper process (mindfile._publish), and
searches rank a BM25 backlog with FTS5 on top of what the index holds."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import mindfile
from mindfile import _publish
from mindfile.retrieve import lexical
from mindfile.retrieve.retriever import ReadFilter, Retriever

from ._support import count_side_thread_legs

WORDS = ["garden", "tomato", "lisbon", "porto", "train", "battery"]
WORDS += ["solar", "budget", "meeting", "sister", "violin", "harbour"]


def _events(start: int, n: int) -> list[tuple[str, int, str]]:
    return [
        (
            f"s{i % 11}",
            i // 11,
            f"{WORDS[i % 12]} {WORDS[(i * 5) % 12]} {WORDS[(i * 7) % 12]} note w{i}x",
        )
        for i in range(start, start + n)
    ]


def _wait_for(check, timeout: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.05)
    return bool(check())


def _manifest(path: Path, kind: str) -> dict[str, object] | None:
    f = Path(f"{path}.index") / kind / "manifest.json"
    return json.loads(f.read_text()) if f.exists() else None


QUERIES = ["lisbon porto", "solar battery budget", "w17x", "w4321x garden", "sister violin"]


def _answers(mem: mindfile.Mindfile) -> list[list[tuple[str, float]]]:
    return [[(h.chunk_id, round(h.score, 9)) for h in mem.search(q, top_k=10)] for q in QUERIES]


@pytest.mark.skipif(not _publish.publisher_allowed(), reason="helper processes are off here")
def test_a_bulk_ingest_is_published_by_the_helper_and_answers_as_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper publishes BM25 and exact generations while store_many runs; the
    ingesting process maps them and answers exactly as a store that indexed itself."""
    path = tmp_path / "pub.db"
    mem = mindfile.open(path, embedder="hash", vector_index="exact")
    assert mem._publisher is not None
    mem._publisher._start_after = 500
    for start in range(0, 6000, 500):
        mem.store_many(_events(start, 500))
    assert mem._publisher.started == 1
    assert mem._publisher.wait(60)  # it publishes the rest, then exits when idle
    high = mem.info().chunks
    bm25 = _manifest(path, "bm25")
    exact = _manifest(path, "exact")
    assert bm25 is not None and bm25["max_id"] == high
    assert bm25["l0"] is None  # the helper folded its last L0 into the base when idle
    assert exact is not None and int(exact["max_id"]) >= 4096  # type: ignore[call-overload]
    assert mem.lexical is not None and mem.lexical.usable()
    got = _answers(mem)
    mem.close()

    monkeypatch.setenv("MINDFILE_PUBLISHER", "0")
    ref_path = tmp_path / "ref.db"
    with mindfile.open(ref_path, embedder="hash", vector_index="exact") as ref:
        assert ref._publisher is None
        for start in range(0, 6000, 500):
            ref.store_many(_events(start, 500))
        assert ref.lexical is not None
        ref.lexical.size()  # its own BM25 index, caught up (not FTS5's ranking)
        want = _answers(ref)
    assert [[c for c, _ in hits] for hits in got] == [[c for c, _ in hits] for hits in want]
    for hits, ref_hits in zip(got, want, strict=True):
        assert [s for _, s in hits] == pytest.approx([s for _, s in ref_hits], abs=1e-9)


@pytest.mark.skipif(not _publish.publisher_allowed(), reason="helper processes are off here")
def test_while_the_helper_runs_the_vector_index_follows_each_write(tmp_path: Path) -> None:
    """After each store_many the writing engine's vector index already holds the rows
    just committed (no search needed): the first search after the ingest reads none back."""
    mem = mindfile.open(tmp_path / "follow.db", embedder="hash", vector_index="exact")
    assert mem._publisher is not None
    mem._publisher._start_after = 300
    followed = 0
    for start in range(0, 3000, 300):
        mem.store_many(_events(start, 300))
        if mem._publisher.running:
            high = int(mem.db.scalar("SELECT max(chunk_rowid) FROM chunks_vec"))
            assert mem.index._delta.max_id == high  # type: ignore[attr-defined]
            followed += 1
    assert followed >= 5
    assert mem._publisher.wait(60)
    assert mem.index.size() == mem.info().chunks
    mem.close()


def test_a_backlog_is_ranked_by_the_index_it_holds_plus_fts5_for_newer_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FTS5 ranks only the chunks the index does not hold yet, on the index's own BM25
    scale: the same scores as after the catch-up, and nearly the same top 30."""
    monkeypatch.setattr(lexical, "BACKLOG", 20)
    queries = ["lisbon porto", "solar battery", "sister violin harbour", "garden", "w1230x"]
    with mindfile.open(tmp_path / "tail.db", embedder="hash", vector_index="exact") as mem:
        bm25 = mem.lexical
        assert bm25 is not None
        mem.store_many(_events(0, 1200))
        assert bm25.merge()  # a published base holding the first 1,200 chunks
        held = bm25.held_through()
        assert held == mem.info().chunks
        monkeypatch.setattr(bm25, "deferred", lambda: True)  # a publisher catches up, not us
        mem.store_many(_events(1200, 60))
        assert not bm25.usable()
        retriever = Retriever(mem.db, mem.index, bm25)

        def lexical_leg(q: str) -> tuple[list[tuple[int, float]], str | None]:
            legs = retriever.legs(q, None, ReadFilter(), vector_k=0, lexical_k=30)
            return legs.lexical, legs.lexical_backend

        during = {q: lexical_leg(q) for q in queries}
        assert {backend for _, backend in during.values()} == {"memory+fts5"}
        assert mem.search("w1230x", top_k=1, mode="fts")[0].text.endswith("w1230x")
        assert mem.search("w42x", top_k=1, mode="fts")[0].text.endswith("w42x")
        assert bm25.held_through() == held  # nothing was caught up meanwhile

        monkeypatch.setattr(bm25, "deferred", lambda: False)
        bm25.size()  # caught up: the index ranks everything itself again
        compared = 0
        for q in queries:
            after, backend = lexical_leg(q)
            assert backend == "memory"
            hits, _ = during[q]
            assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
            assert len({r for r, _ in hits} & {r for r, _ in after}) >= 0.8 * len(after)
            final = dict(after)
            for rowid, score in hits:
                if rowid > held and rowid in final:  # ranked by FTS5 during the backlog
                    assert score == pytest.approx(final[rowid], rel=1e-6)
                    compared += 1
        assert compared >= 4  # the backlog's chunks competed with the held ones


def test_a_search_leaves_a_backlog_to_the_helper_that_publishes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a helper process publishes for this one, a search tokenises at most
    DEFERRED_BACKLOG chunks itself (the first search after a bulk ingest took 100-170 ms
    catching up 2,000); a larger backlog is ranked by FTS5 until the helper's generation
    is out. Without a helper, up to BACKLOG are caught up in the search as before."""
    with mindfile.open(tmp_path / "defer.db", embedder="hash", vector_index="exact") as mem:
        bm25 = mem.lexical
        assert bm25 is not None
        mem.store_many(_events(0, 600))
        assert bm25.merge()
        held = bm25.held_through()
        mem.store_many(_events(600, lexical.DEFERRED_BACKLOG + 1))
        helper = [True]
        monkeypatch.setattr(bm25, "deferred", lambda: helper[0])
        retriever = Retriever(mem.db, mem.index, bm25)

        def best(q: str) -> tuple[int, str | None]:
            legs = retriever.legs(q, None, ReadFilter(), vector_k=0, lexical_k=1)
            return legs.lexical[0][0], legs.lexical_backend

        def rowid(word: str) -> int:
            return int(
                mem.db.scalar("SELECT id FROM chunks WHERE chunk_text LIKE ?", (f"%{word}",))
            )

        assert best("w700x") == (rowid("w700x"), "memory+fts5")
        assert bm25.held_through() == held  # nothing tokenised here
        helper[0] = False  # the helper is gone: the search catches up itself
        assert best("w700x") == (rowid("w700x"), "memory")
        assert bm25.held_through() == mem.info().chunks
        mem.store_many(_events(900, 40))  # a small backlog is caught up even with a helper
        helper[0] = True
        assert best("w930x") == (rowid("w930x"), "memory")


@contextlib.contextmanager
def _behind(
    path: Path, monkeypatch: pytest.MonkeyPatch, published: int, more: int = 0
) -> Iterator[tuple[mindfile.Mindfile, lexical.Bm25Index, Retriever]]:
    """A store whose published BM25 base holds its first ``published`` events, ``more``
    written after it, and an index that leaves catching up to a helper (``deferred``):
    the state right after a bulk ingest, before the helper's last generation."""
    monkeypatch.setattr(lexical, "BACKLOG", 20)
    with mindfile.open(path, embedder="hash", vector_index="exact") as mem:
        bm25 = mem.lexical
        assert bm25 is not None
        mem.store_many(_events(0, published))
        assert bm25.merge()
        monkeypatch.setattr(bm25, "deferred", lambda: True)
        if more:
            mem.store_many(_events(published, more))
        yield mem, bm25, Retriever(mem.db, mem.index, bm25)


def test_fts5_ranks_a_backlog_without_the_words_most_documents_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A word in more than COMMON_SHARE of the held documents adds little to any score
    and makes FTS5 score most of the backlog: it is left out of the backlog's query,
    unless every word of the query is that common."""
    with _behind(tmp_path / "common.db", monkeypatch, 600) as (mem, bm25, retriever):
        monkeypatch.setattr(lexical, "DEFERRED_BACKLOG", 0)  # even 3 chunks wait for it
        mem.store_many(
            [("t1", 1, "w9001x note"), ("t2", 1, "zebra note"), ("t3", 1, "zebra crossing")]
        )
        assert bm25.common_words(["note", "zebra", "w42x"], 0.25) == {"note"}

        def backlog_hits(q: str) -> tuple[set[str], str | None]:
            legs = retriever.legs(q, None, ReadFilter(), vector_k=0, lexical_k=1000)
            rows = mem.db.query(
                "SELECT id, chunk_text FROM chunks WHERE id > 600",
            )
            tail = {int(r): str(t) for r, t in rows}
            return {tail[r] for r, _ in legs.lexical if r in tail}, legs.lexical_backend

        found, backend = backlog_hits("zebra note")
        assert backend == "memory+fts5"
        assert found == {"zebra note", "zebra crossing"}  # "note" alone: left out
        found, _ = backlog_hits("note")  # every word common: kept
        assert found == {"w9001x note", "zebra note"}


def test_the_held_index_and_fts5_overlap_the_vector_leg_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the index catches up, its part and FTS5's run on the side thread during the
    vector leg (FTS5 ranks in SQLite, without the interpreter's lock): the same hits as
    when they run after it, and the caller's side work runs on them too."""
    queries = ["lisbon porto", "solar battery", "sister violin harbour", "w1230x"]
    with _behind(tmp_path / "side.db", monkeypatch, 1200, 60) as (mem, bm25, retriever):
        vectors = {q: mem.embedder.embed_query(q) for q in queries}

        def legs(q: str, then: object = None) -> object:
            return retriever.legs(q, vectors[q], ReadFilter(), vector_k=30, lexical_k=30, then=then)

        after = {q: legs(q) for q in queries}  # below the size that overlaps
        started = count_side_thread_legs(monkeypatch)
        during = {q: legs(q, then=len) for q in queries}
        assert started[0] == len(queries)
        for q in queries:
            one, other = after[q], during[q]
            assert other.lexical_backend == one.lexical_backend == "memory+fts5"
            assert other.lexical == one.lexical and other.vector == one.vector
            assert one.then is None and other.then == len(other.lexical) > 0
        assert bm25.held_through() == 1200  # nothing was caught up meanwhile


@pytest.mark.skipif(not _publish.publisher_allowed(), reason="helper processes are off here")
def test_a_killed_publisher_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "kill.db"
    with mindfile.open(path, embedder="hash", vector_index="exact") as mem:
        assert mem._publisher is not None
        mem._publisher._start_after = 300
        mem.store_many(_events(0, 300))
        proc = mem._publisher._procs["index"]
        assert proc is not None
        time.sleep(0.3)  # somewhere in its first catch-up or publish
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        mem.store_many(_events(300, 3000))  # starts a new helper
        assert mem._publisher.started == 2
        assert mem._publisher.wait(60)
        for i in (7, 299, 301, 1500, 3299):
            hits = mem.search(f"w{i}x", top_k=1, mode="fts")
            assert hits and hits[0].text.endswith(f"w{i}x")
        assert mem.lexical is not None
        assert mem.lexical.merge()  # publishing still works after the kill


@pytest.mark.skipif(not _publish.publisher_allowed(), reason="helper processes are off here")
def test_close_stops_the_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_publish, "IDLE_SECONDS", 600.0)  # would outlive the test
    mem = mindfile.open(tmp_path / "close.db", embedder="hash", vector_index="exact")
    assert mem._publisher is not None
    mem._publisher._start_after = 100
    mem.store_many(_events(0, 200))
    proc, flags = mem._publisher._procs["index"], mem._publisher._procs["flags"]
    assert proc is not None and proc.poll() is None
    assert flags is not None and flags.poll() is None
    # The flags helper yields to everything (it works only with CPU nothing else wants);
    # the index helper keeps our priority (what it leaves unpublished, searches pay for).
    if hasattr(os, "SCHED_IDLE"):
        assert _wait_for(lambda: os.sched_getscheduler(flags.pid) == os.SCHED_IDLE, 30)
        assert os.sched_getscheduler(proc.pid) != os.SCHED_IDLE
    else:
        assert _wait_for(lambda: os.getpriority(os.PRIO_PROCESS, flags.pid) >= _publish.NICE, 30)
    assert os.getpriority(os.PRIO_PROCESS, proc.pid) == os.getpriority(os.PRIO_PROCESS, 0)
    mem.close()
    assert _wait_for(lambda: proc.poll() is not None, 30)
    assert _wait_for(lambda: flags.poll() is not None, 30)


def test_a_pause_restarts_the_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only writes without a pause of IDLE_SECONDS add up to a bulk ingest."""
    monkeypatch.setattr(_publish, "IDLE_SECONDS", 0.05)
    started: list[list[str]] = []

    class _Popen:
        def __init__(self, argv: list[str], **_: object) -> None:
            started.append(argv)

        def poll(self) -> int | None:
            return None

    monkeypatch.setattr(_publish.subprocess, "Popen", _Popen)
    pub = _publish.Publisher("store.db", "exact", start_after=10)
    pub.wrote(6)
    time.sleep(0.1)
    pub.wrote(6)  # 12 chunks, but not without a pause
    assert started == []
    pub.wrote(4)
    assert [argv[-3:] for argv in started] == [
        ["store.db", "index", "exact"],
        ["store.db", "flags", "exact"],
    ]
    pub.wrote(50)  # one pair of helpers at a time
    assert len(started) == 2


def test_no_publisher_where_it_cannot_publish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with mindfile.open(":memory:", embedder="hash") as mem:
        assert mem._publisher is None
    with mindfile.open(tmp_path / "v.db", embedder="hash", lexical_index="fts5") as mem:
        assert mem._publisher is None or mem._publisher._vector_index == "exact"
    monkeypatch.setenv("MINDFILE_PUBLISHER", "off")
    with mindfile.open(tmp_path / "w.db", embedder="hash") as mem:
        assert mem._publisher is None


def test_backlog_searches_never_rank_a_chunk_twice_while_the_index_catches_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held index's hits and FTS5's newer ones come from one state's boundary, even
    while another thread catches the index up (thread switches at nearly every bytecode)."""
    import sys
    import threading

    with _behind(tmp_path / "race.db", monkeypatch, 600) as (mem, bm25, retriever):
        errors: list[BaseException] = []
        backends: set[str | None] = set()
        stop = threading.Event()

        def search() -> None:
            try:
                while not stop.is_set():
                    legs = retriever.legs(
                        "lisbon porto garden", None, ReadFilter(), vector_k=0, lexical_k=200
                    )
                    rowids = [r for r, _ in legs.lexical]
                    assert len(rowids) == len(set(rowids)), "a chunk ranked twice"
                    backends.add(legs.lexical_backend)
            except BaseException as exc:
                errors.append(exc)

        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        threads = [threading.Thread(target=search) for _ in range(3)]
        try:
            for t in threads:
                t.start()
            for start in range(600, 1400, 100):
                mem.store_many(_events(start, 100))  # a backlog above BACKLOG
                time.sleep(0.05)
                bm25.size()  # caught up by this thread, under the searches
        finally:
            stop.set()
            for t in threads:
                t.join(60)
            sys.setswitchinterval(old)
        assert not errors, errors
        assert "memory+fts5" in backends


@pytest.mark.skipif(not _publish.publisher_allowed(), reason="helper processes are off here")
def test_the_helper_stores_the_word_pieces_of_a_bulk_ingest(tmp_path: Path) -> None:
    """With the bundled model, the helper also fills chunks.token_set (token match) and
    the statement flags, and the ingesting process leaves both to it while it runs."""
    from mindfile.index.statements import is_user_statement
    from mindfile.retrieve import preferences, token_match

    path = tmp_path / "tok.db"
    mem = mindfile.open(path, vector_index="exact")
    assert mem._publisher is not None
    mem._publisher._start_after = 500
    for start in range(0, 3000, 500):
        mem.store_many(_events(start, 500))
    assert mem._publisher.started == 1
    assert token_match.deferred(mem.db) == mem._publisher.running
    assert preferences.deferred(mem.db) == mem._publisher.running
    assert mem._publisher.wait(60)
    assert not token_match.deferred(mem.db)
    assert not preferences.deferred(mem.db)
    # ... and the statement flags (preference recall), classified as this process would
    flags = mem.db.query("SELECT chunk_text, metadata_json, user_statement FROM chunks")
    assert flags and all(f is not None for _, _, f in flags)
    assert [bool(f) for _, _, f in flags] == [is_user_statement(t, m) for t, m, _ in flags]
    rows = mem.db.query("SELECT chunk_text, token_set FROM chunks")
    matcher = token_match.matcher_for(mem.embedder)
    assert matcher is not None and rows
    for text, blob in rows:
        assert blob is not None, "a chunk the helper left without its word pieces"
        assert bytes(blob) == matcher.token_sets([text])[0].astype("<u2").tobytes()
    mem.close()


def test_every_process_on_the_store_defers_to_a_running_helper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A helper holds its role's lock while it runs; an engine that did not start it
    (another process, here another engine) leaves that role's work to it too."""
    from mindfile.retrieve import preferences, token_match

    monkeypatch.setattr(_publish, "_RUNNING_TTL", 0.0)
    path = tmp_path / "shared.db"
    with mindfile.open(path, embedder="hash", vector_index="exact") as mem:
        if mem._publisher is None:
            pytest.skip("helper processes are off here")
        mem.store_many(_events(0, 50))
        folder = Path(f"{path}.index")
        assert not _publish.helper_running(folder, "flags")
        assert not preferences.deferred(mem.db) and not token_match.deferred(mem.db)
        with _publish._holding_role(folder, "flags"):  # as the other process's helper does
            assert _publish.helper_running(folder, "flags")
            assert not _publish.helper_running(folder, "index")
            assert preferences.deferred(mem.db) and token_match.deferred(mem.db)
            assert mem.lexical is not None and not mem.lexical.deferred()
        assert not preferences.deferred(mem.db) and not token_match.deferred(mem.db)
        with _publish._holding_role(folder, "index"):
            assert mem.lexical.deferred() and mem.index.deferred()  # type: ignore[attr-defined]
        assert not mem.lexical.deferred()


def test_the_helper_publishes_bm25_while_a_vector_merge_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index helper merges vectors in a thread of its own: a long vector merge (zvec
    at 1M chunks: minutes) must not stop BM25 generations from being published, or every
    search ranks the chunks written meanwhile with FTS5. Runs the helper's loop in this
    process, with a vector merge that waits until told to go on."""
    import threading

    from mindfile.storage.db import Database
    from mindfile.vector.exact_disk import ExactDiskIndex

    monkeypatch.setenv("MINDFILE_PUBLISHER", "0")  # only the helper loop below publishes
    monkeypatch.setattr(_publish, "POLL_SECONDS", 0.05)
    monkeypatch.setattr(ExactDiskIndex, "min_delta", 10)
    entered, release, stop = threading.Event(), threading.Event(), threading.Event()
    real = ExactDiskIndex.merge

    niceness: list[int] = []

    def slow_merge(self: ExactDiskIndex, **kw: bool) -> bool:
        niceness.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        entered.set()
        assert release.wait(60)
        return bool(real(self, **kw))

    monkeypatch.setattr(ExactDiskIndex, "merge", slow_merge)
    monkeypatch.setattr(_publish, "_parent_gone", stop.is_set)
    path = tmp_path / "helper.db"
    with mindfile.open(path, embedder="hash", vector_index="exact") as mem:
        mem.store_many(_events(0, 300))
        db = Database(str(path))
        helper = threading.Thread(target=_publish._serve_index, args=(db, "exact"))
        helper.start()
        try:
            assert entered.wait(30)  # the vector merge started, and waits
            mem.store_many(_events(300, 200))
            high = mem.info().chunks
            assert _wait_for(lambda: (_manifest(path, "bm25") or {}).get("max_id") == high)
            assert not release.is_set() and _manifest(path, "exact") is None
            release.set()  # the merge goes on; the one asked for when writes paused follows
            assert _wait_for(lambda: (_manifest(path, "exact") or {}).get("max_id") == high)
        finally:
            release.set()
            stop.set()
            helper.join(60)
            db.close()
        assert not helper.is_alive()
        assert mem.index.size() == high and mem.search("lisbon porto", top_k=3)
    # below the writer and the BM25 thread (unless this process runs lower already)
    assert niceness and min(niceness) >= _publish.VECTOR_NICE


def test_helpers_run_with_one_blas_thread_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """BLAS worker threads spin between calls: a helper keeps to its own core."""
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert _publish.helper_environment()["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    assert _publish.helper_environment()["OPENBLAS_NUM_THREADS"] == "4"


def test_the_helper_takes_a_usual_gap_between_batches_for_no_end_of_the_writes() -> None:
    """A bulk ingest commits batch after batch, with gaps while the writer prepares the
    next; the index helper must not take each for the end of the ingest (it published a
    quick L0 generation every 1-3 s that way), and must still see the end soon."""
    pauses = _publish.Pauses()
    assert pauses.settle_after() == _publish.POLL_SECONDS  # nothing seen yet
    for gap in [0.05, 0.3, 0.25, 0.4, 0.1]:
        pauses.saw(gap)
    # a pause as long as the longest recent gap is still the ingest
    assert pauses.settle_after() == pytest.approx(_publish.SETTLE_FACTOR * 0.4)
    assert pauses.settle_after() > 0.4
    # one long stall raises it, within bounds; it is forgotten after PAUSES_SEEN gaps
    pauses.saw(60.0)
    assert pauses.settle_after() == _publish.SETTLE_MAX
    for _ in range(_publish.PAUSES_SEEN):
        pauses.saw(0.01)
    assert pauses.settle_after() == _publish.POLL_SECONDS


def test_the_helper_publishes_once_at_the_end_not_between_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper's loop with a writer that commits a batch every ~0.3 s (longer than
    POLL_SECONDS, as a bulk ingest's batches come): the quick publish of "the writes
    paused" must come after the last batch, not after each (it came after each when a
    0.2 s pause was taken for the end)."""
    import threading

    from mindfile.storage.db import Database

    monkeypatch.setenv("MINDFILE_PUBLISHER", "0")  # only the helper loop below publishes
    stop = threading.Event()
    monkeypatch.setattr(_publish, "_parent_gone", stop.is_set)
    quick: list[float] = []
    real_publish = lexical.Bm25Index.publish

    def counting(self: lexical.Bm25Index, **kw: bool) -> bool:
        if kw.get("quick"):
            quick.append(time.monotonic())
        return bool(real_publish(self, **kw))

    monkeypatch.setattr(lexical.Bm25Index, "publish", counting)
    path = tmp_path / "helper.db"
    with mindfile.open(path, embedder="hash") as mem:
        mem.store_many(_events(0, 50))
        db = Database(str(path))
        helper = threading.Thread(target=_publish._serve_index, args=(db, None))
        helper.start()
        try:
            time.sleep(1.0)  # the helper catches the first batch up
            quick.clear()
            batches = 20
            for i in range(batches):
                time.sleep(0.3)
                mem.store_many(_events(50 + 20 * i, 20))
            last = time.monotonic()
            high = mem.info().chunks
            assert _wait_for(lambda: (_manifest(path, "bm25") or {}).get("max_id") == high)
            assert _wait_for(lambda: any(t > last for t in quick), timeout=10)
        finally:
            stop.set()
            helper.join(60)
            db.close()
        assert not helper.is_alive()
    during = [t for t in quick if t <= last]
    # A writer stall longer than 1.5x every gap before it may still count as a pause;
    # one after each batch is what the 0.2 s rule did.
    assert len(during) <= 3, f"{len(during)} quick publishes during {batches} batches"
