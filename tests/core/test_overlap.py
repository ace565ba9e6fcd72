"""A search's two legs at once: the BM25 leg on the process's side thread
(mindfile/retrieve/overlap.py) gives the same results as running them in turn."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest

import mindfile
from mindfile.retrieve import retriever
from mindfile.retrieve.overlap import SideThread, alone, overlap_allowed, searching, side_thread

from ._support import count_side_thread_legs, in_threads

WORDS = [
    "hike",
    "lisbon",
    "dog",
    "porto",
    "sister",
    "concert",
    "garden",
    "piano",
    "train",
    "coffee",
    "book",
    "river",
]


def test_the_side_thread_takes_one_task_and_is_free_again_when_it_ends() -> None:
    side = SideThread()
    release = threading.Event()
    first = side.try_start(lambda: release.wait(10) and "first")
    assert first is not None
    assert side.try_start(lambda: "second") is None  # busy: the caller runs it itself
    release.set()
    assert first.result(10) == "first"
    again = side.try_start(lambda: 41 + 1)
    assert again is not None and again.result(10) == 42


def test_an_exception_on_the_side_thread_reaches_the_caller_and_frees_it() -> None:
    side = SideThread()

    def fail() -> None:
        raise ValueError("leg failed")

    failed = side.try_start(fail)
    assert failed is not None
    with pytest.raises(ValueError, match="leg failed"):
        failed.result(10)
    after = side.try_start(lambda: "ok")
    assert after is not None and after.result(10) == "ok"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_a_forked_child_starts_its_own_side_thread() -> None:
    busy = threading.Event()
    release = threading.Event()

    def hold() -> str:
        busy.set()
        release.wait(10)
        return "parent"

    held = side_thread().try_start(hold)
    assert held is not None and busy.wait(10)  # the parent's side thread is busy at the fork
    pid = os.fork()
    if pid == 0:  # the child: its side thread must start and answer, not hang
        code = 1
        try:
            mine = side_thread().try_start(lambda: "child")
            code = 0 if mine is not None and mine.result(5) == "child" else 2
        finally:
            os._exit(code)
    release.set()
    assert held.result(10) == "parent"
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_search_is_alone_only_while_no_other_is_in_flight() -> None:
    assert alone()
    inside = threading.Event()
    release = threading.Event()

    def other() -> None:
        with searching():
            inside.set()
            release.wait(10)

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    with searching():
        assert not alone()
    release.set()
    t.join(10)
    with searching():
        assert alone()


def test_overlap_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINDFILE_SEARCH_OVERLAP", "off")
    assert not overlap_allowed()
    monkeypatch.setenv("MINDFILE_SEARCH_OVERLAP", "1")
    assert overlap_allowed() == ((os.cpu_count() or 1) >= 2)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every search overlaps; counts the legs run on the side thread."""
    yield count_side_thread_legs(monkeypatch)


def _filled(location: str) -> mindfile.Mindfile:
    mem = mindfile.open(location, embedder="hash")
    mem.store_many(
        [
            ("s1" if i % 3 else "s2", i, " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7)))
            for i in range(1, 400)
        ]
    )
    assert mem.lexical is not None
    mem.lexical.size()  # built: searches take the in-memory BM25 path
    return mem


def _answers(mem: mindfile.Mindfile, queries: list[str]) -> list[list[tuple[str, float]]]:
    return [[(hit.chunk_id, hit.score) for hit in mem.search(q, top_k=8)] for q in queries]


def test_results_equal_the_legs_in_turn_across_many_threads(
    store_location: str, counted: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = _filled(store_location)
    queries = [f"{a} {b}" for a in WORDS for b in WORDS[::3]]
    monkeypatch.setattr(retriever, "overlap_allowed", lambda: False)
    in_turn = _answers(mem, queries)
    assert counted[0] == 0
    monkeypatch.setattr(retriever, "overlap_allowed", lambda: True)
    assert _answers(mem, queries) == in_turn
    assert counted[0] == len(queries)  # one thread: the side thread is always free

    def worker() -> None:
        assert _answers(mem, queries) == in_turn

    in_threads(worker, 6)
    assert counted[0] > len(queries)  # some of the threads' legs ran on the side thread
    mem.close()


def test_inside_a_transaction_the_legs_run_in_turn(store_location: str, counted: list[int]) -> None:
    mem = _filled(store_location)
    expected = _answers(mem, ["hike dog", "piano river"])
    counted[0] = 0
    with mem.db.atomic():  # the side thread would wait for the lock this thread holds
        assert _answers(mem, ["hike dog", "piano river"]) == expected
    assert counted[0] == 0
    mem.close()


def test_meanwhile_runs_on_the_searching_thread_while_then_runs_on_the_side(
    store_location: str, counted: list[int]
) -> None:
    """With the BM25 leg on the side thread, ``then`` runs there and ``meanwhile`` on
    the searching thread, both with the leg's hits (hidden ones included), and they run
    at the same time: ``meanwhile`` waits for nothing ``then`` does."""
    mem = _filled(store_location)
    rt = retriever.Retriever(mem.db, mem.index, mem.lexical)
    vec = mem.embedder.embed_query("hike dog")
    seen: dict[str, tuple[str, list[tuple[int, float]]]] = {}
    both_running = threading.Barrier(2, timeout=10)

    def record(name: str, hits: list[tuple[int, float]]) -> str:
        seen[name] = (threading.current_thread().name, list(hits))
        both_running.wait()  # each waits for the other: they must overlap
        return name

    legs = rt.legs(
        "hike dog",
        vec,
        retriever.ReadFilter(),
        vector_k=20,
        lexical_k=20,
        then=lambda hits: record("then", hits),
        meanwhile=lambda hits: record("meanwhile", hits),
    )
    assert counted[0] == 1
    assert (legs.then, legs.meanwhile) == ("then", "meanwhile")
    assert seen["then"][0] == "mindfile-search-leg"
    assert seen["meanwhile"][0] == threading.current_thread().name
    assert seen["then"][1] == seen["meanwhile"][1] == legs.lexical != []
    in_turn = rt.legs("hike dog", vec, retriever.ReadFilter(), vector_k=20, lexical_k=20)
    assert (in_turn.vector, in_turn.lexical) == (legs.vector, legs.lexical)
    mem.close()


def test_a_failing_bm25_leg_reaches_the_caller_without_running_meanwhile(
    store_location: str, counted: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = _filled(store_location)
    rt = retriever.Retriever(mem.db, mem.index, mem.lexical)
    vec = mem.embedder.embed_query("hike dog")

    def broken(*args: object, **kwargs: object) -> list[tuple[int, float]]:
        raise RuntimeError("bm25 failed")

    assert mem.lexical is not None
    monkeypatch.setattr(mem.lexical, "search", broken)
    called: list[object] = []
    with pytest.raises(RuntimeError, match="bm25 failed"):
        rt.legs(
            "hike dog",
            vec,
            retriever.ReadFilter(),
            vector_k=20,
            lexical_k=20,
            then=called.append,
            meanwhile=called.append,
        )
    assert counted[0] == 1 and called == []
    assert side_thread().try_start(lambda: None) is not None  # the side thread is free
    mem.close()
