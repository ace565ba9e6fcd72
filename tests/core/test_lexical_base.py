"""The BM25 base published on disk (retrieve/lexical_disk.py): shared by processes, exact,
never trusted when it does not fit the store."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import mindfile
from mindfile.retrieve import lexical, lexical_publish
from mindfile.retrieve.fts import fts_search
from mindfile.retrieve.lexical import Bm25Index
from mindfile.retrieve.lexical_state import Frozen
from mindfile.vector.base import VectorFilter

WORDS = [
    "garden",
    "tomato",
    "rain",
    "sunny",
    "hike",
    "dog",
    "cat",
    "peanut",
    "allergy",
    "lisbon",
    "porto",
    "train",
    "battery",
    "solar",
    "budget",
    "meeting",
    "sister",
    "visit",
    "painting",
    "pottery",
    "running",
    "camping",
    "lake",
    "sunrise",
    "music",
    "guitar",
    "book",
    "library",
    "coffee",
    "bread",
    "market",
    "river",
    "mountain",
]
QUERIES = ["tomato garden", "lisbon train", "coffee market river", "dog", "music guitar book"]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14)))


def _same_as_fts5(mem: mindfile.Mindfile, where: VectorFilter | None = None) -> None:
    """Every query ranks exactly like FTS5's bm25() on the same store."""
    assert mem.lexical is not None
    for query in QUERIES:
        got = mem.lexical.search(query, 1000, where=where)
        if where is not None and where.session_ids is not None:
            sql = " AND c.session_id IN (SELECT value FROM json_each(?))"
            want = fts_search(mem.db, query, 1000, sql, [json.dumps(where.session_ids)])
        else:
            want = fts_search(mem.db, query, 1000)
        assert dict(got) == pytest.approx(dict(want), rel=1e-5, abs=1e-12), query
        scores = [s for _, s in got]
        assert all(x >= y - 1e-9 * max(1.0, abs(x)) for x, y in itertools.pairwise(scores))


def _fill(mem: mindfile.Mindfile, session: str, n: int, seed: int) -> None:
    rng = random.Random(seed)
    start = int(
        mem.db.scalar("SELECT count(*) FROM conversation_events WHERE session_id = ?", (session,))
    )
    mem.store_many([(session, start + i, _text(rng)) for i in range(1, n + 1)])


def _wait(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def small_merges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Publish after a few chunks instead of thousands."""
    monkeypatch.setattr(lexical, "MERGE_MIN", 20)
    monkeypatch.setattr(lexical, "BACKLOG", 1_000)


def _index(mem: mindfile.Mindfile) -> Bm25Index:
    assert mem.lexical is not None
    return mem.lexical


def _with_base(mem: mindfile.Mindfile, chunks: int, seed: int) -> Bm25Index:
    """``mem``'s index after ``chunks`` chunks of session "a" published as its base."""
    _fill(mem, "a", chunks, seed=seed)
    index = _index(mem)
    assert index.merge()
    return index


def _concurrently(workers: list[Callable[[], None]], loops: list[Callable[[], None]]) -> None:
    """Run ``workers`` to their end while each of ``loops`` is called over and over in
    a thread of its own, at a switch interval of 1 us; no thread may raise."""
    errors: list[BaseException] = []
    stop = threading.Event()

    def work(fn: Callable[[], None]) -> None:
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)

    def loop(fn: Callable[[], None]) -> None:
        try:
            while not stop.is_set():
                fn()
        except BaseException as exc:
            errors.append(exc)

    sys.setswitchinterval(1e-6)
    try:
        first = [threading.Thread(target=work, args=(fn,)) for fn in workers]
        rest = [threading.Thread(target=loop, args=(fn,)) for fn in loops]
        for t in first + rest:
            t.start()
        for t in first:
            t.join()
        stop.set()
        for t in rest:
            t.join()
    finally:
        sys.setswitchinterval(0.005)
    assert not errors, errors


def _searching(index: Bm25Index) -> Callable[[], None]:
    def search() -> None:
        for q in QUERIES:
            index.search(q, 10)

    return search


@pytest.mark.usefixtures("small_merges")
def test_a_second_process_maps_the_published_base_instead_of_tokenising(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        _fill(mem, "a", 60, seed=1)
        _fill(mem, "b", 40, seed=2)
        assert _index(mem).merge()
        assert _index(mem).stats()["base_docs"] == 100
        _same_as_fts5(mem)
    folder = tmp_path / "m.db.index" / "bm25"
    assert (folder / "manifest.json").exists()
    code = (
        "import json, sys, mindfile\n"
        "m = mindfile.open(sys.argv[1], embedder='hash')\n"
        "m.search('tomato garden', mode='fts')\n"
        "print(json.dumps(m.lexical.stats()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], check=True, capture_output=True, text=True
    )
    stats = json.loads(out.stdout)
    assert (stats["base_docs"], stats["delta_docs"], stats["state"]) == (100, 0, "ready")


@pytest.mark.usefixtures("small_merges")
def test_base_plus_delta_ranks_like_fts5_through_updates_deletes_and_merges(
    tmp_path: Path,
) -> None:
    with mindfile.open(tmp_path / "m.db", embedder="hash") as mem:
        _fill(mem, "a", 50, seed=3)
        _fill(mem, "b", 30, seed=4)
        assert _index(mem).merge()
        _same_as_fts5(mem)
        # New chunks (delta), neighbour-context updates of base chunks, deletions.
        _fill(mem, "a", 10, seed=5)
        mem.store("c", 1, "tomato garden lisbon")
        _same_as_fts5(mem)
        mem.forget("b")
        _same_as_fts5(mem)
        _same_as_fts5(mem, VectorFilter(session_ids=["c"]))
        _same_as_fts5(mem, VectorFilter(session_ids=["a", "c"]))
        stats = _index(mem).stats()
        # a's last base chunk got new context (turn 51): it moved to the delta.
        assert (stats["base_docs"], stats["delta_docs"]) == (49, 12)
        # A fresh engine on the same file: base from disk, the rest caught up.
        with mindfile.open(tmp_path / "m.db", embedder="hash") as other:
            _same_as_fts5(other)
        assert _index(mem).merge()
        assert _index(mem).stats()["delta_docs"] == 0
        _same_as_fts5(mem)
        _same_as_fts5(mem, VectorFilter(session_ids=["a"]))


@pytest.mark.usefixtures("small_merges")
def test_merges_happen_by_themselves_and_others_switch_to_them(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as writer, mindfile.open(path) as reader:
        _fill(writer, "a", 30, seed=6)
        mem_index = _index(writer)
        mem_index.size()  # builds; 30 >= MERGE_MIN starts a merge in the background
        _wait(lambda: mem_index.stats()["base_docs"] == 30)
        first = mem_index.stats()["base_generation"]
        _same_as_fts5(reader)
        _fill(writer, "a", 30, seed=7)  # delta of 30 >= MERGE_MIN: published again
        mem_index.size()
        _wait(lambda: mem_index.stats()["delta_docs"] == 0)
        # 31 recent chunks >= L0_FRACTION of 30: folded into a new base, not an L0
        assert mem_index.stats()["base_generation"] != first
        newest = mem_index.stats()["base_generation"]
        # The reader switches at its next searches (in the background), then is exact.
        _wait(
            lambda: (
                bool(_index(reader).search("tomato", 5) is not None)
                and _index(reader).stats()["base_generation"] == newest
            )
        )
        _same_as_fts5(reader)
        assert len(list((tmp_path / "m.db.index" / "bm25").iterdir())) == 3  # +lock, manifest


@pytest.mark.usefixtures("small_merges")
@pytest.mark.parametrize("damage", ["truncate", "delete", "garbage-manifest"])
def test_a_damaged_or_missing_base_is_ignored_and_rebuilt(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        _fill(mem, "a", 40, seed=8)
        assert _index(mem).merge()
        generation = _index(mem).stats()["base_generation"]
    folder = tmp_path / "m.db.index" / "bm25"
    if damage == "truncate":
        blob = folder / str(generation) / "post_doc.npy"
        blob.write_bytes(blob.read_bytes()[:200])
    elif damage == "delete":
        for child in (folder / str(generation)).iterdir():
            child.unlink()
    else:
        (folder / "manifest.json").write_text("{not json")
    with mindfile.open(path, embedder="hash") as mem:
        assert _index(mem).stats()["base_docs"] == 0
        _same_as_fts5(mem)  # built in memory, exact
        _wait(lambda: _index(mem).stats()["base_generation"] not in (None, generation))
        _same_as_fts5(mem)
    with mindfile.open(path, embedder="hash") as mem:
        mem.search("dog", mode="fts")
        assert _index(mem).stats()["base_docs"] == 40


@pytest.mark.usefixtures("small_merges")
def test_a_base_of_another_store_or_from_the_future_is_never_used(tmp_path: Path) -> None:
    one, two = tmp_path / "one.db", tmp_path / "two.db"
    with mindfile.open(one, embedder="hash") as mem:
        _fill(mem, "a", 40, seed=9)
        assert _index(mem).merge()
    with mindfile.open(two, embedder="hash") as mem:
        _fill(mem, "a", 25, seed=10)
    # Another store's folder copied next to two.db: a different store id.
    import shutil

    shutil.copytree(tmp_path / "one.db.index", tmp_path / "two.db.index")
    with mindfile.open(two, embedder="hash") as mem:
        _same_as_fts5(mem)
        assert _index(mem).stats()["base_docs"] == 0
    # The same store restored from a backup older than its index: from its future.
    backup = tmp_path / "backup.db"
    with mindfile.open(one, embedder="hash") as mem:
        mem.db.execute(f"VACUUM INTO '{backup}'")
        _fill(mem, "a", 30, seed=11)
        assert _index(mem).merge()
    shutil.rmtree(tmp_path / "backup.db.index", ignore_errors=True)
    shutil.copytree(tmp_path / "one.db.index", tmp_path / "backup.db.index")
    with mindfile.open(backup, embedder="hash") as mem:
        _same_as_fts5(mem)
        assert _index(mem).stats()["base_docs"] == 0


@pytest.mark.usefixtures("small_merges")
def test_threads_writing_searching_and_merging_stay_exact(tmp_path: Path) -> None:
    with mindfile.open(tmp_path / "m.db", embedder="hash") as mem:
        _fill(mem, "s0", 30, seed=12)

        def writer(i: int) -> Callable[[], None]:
            def write() -> None:
                for round_ in range(6):
                    _fill(mem, f"s{i}", 15, seed=100 * i + round_)
                    if round_ == 3:
                        mem.forget(f"s{i}")

            return write

        _concurrently([writer(1), writer(2)], [_searching(_index(mem))] * 3)
        _same_as_fts5(mem)
        assert _index(mem).merge()
        _same_as_fts5(mem)


def test_no_base_for_a_store_in_memory_or_without_persistence(tmp_path: Path) -> None:
    with mindfile.open(":memory:", embedder="hash") as mem:
        assert not _index(mem).persisted
        assert not _index(mem).merge()
    with mindfile.open(tmp_path / "m.db", embedder="hash") as mem:
        index = Bm25Index(mem.db, persist=False)
        assert not index.persisted and not index.merge()
        index.close()


@pytest.mark.usefixtures("small_merges")
def test_purge_leaves_no_deleted_term_in_the_published_files(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    secret = "zanzibarquux"
    with mindfile.open(path, embedder="hash") as mem:
        _fill(mem, "keep", 30, seed=13)
        mem.store("secret", 1, f"my password hint is {secret}")
        assert _index(mem).merge()
        folder = tmp_path / "m.db.index" / "bm25"

        def leaked() -> bool:
            return any(secret.encode() in f.read_bytes() for f in folder.rglob("*") if f.is_file())

        assert leaked()  # the term is in the published vocabulary
        mem.forget("secret")
        mem.purge()
        assert not leaked()
        assert _index(mem).search(secret, 5) == []
        _same_as_fts5(mem)


@pytest.mark.usefixtures("small_merges")
def test_follow_publishes_a_bulk_ingest_without_any_search(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        _fill(mem, "a", 50, seed=14)  # store_many: more than MERGE_MIN waiting
        manifest = tmp_path / "m.db.index" / "bm25" / "manifest.json"
        assert not manifest.exists()
        _index(mem).follow()
        _wait(manifest.exists)
        assert json.loads(manifest.read_text())["docs"] == 50
    with mindfile.open(path, embedder="hash") as mem:
        mem.search("tomato", mode="fts")
        assert _index(mem).stats()["base_docs"] == 50


@pytest.mark.usefixtures("small_merges")
def test_small_publishes_write_an_l0_generation_and_stay_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lexical, "L0_FRACTION", 0.5)
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        _fill(mem, "a", 100, seed=20)
        _fill(mem, "b", 60, seed=21)
        index = _index(mem)
        assert index.merge()
        base = index.stats()["base_generation"]
        _fill(mem, "a", 25, seed=22)  # updates a's last base chunk (context), adds 25
        mem.forget("b")  # tombstones 60 base chunks
        index.size()
        _wait(lambda: index.stats()["l0_generation"] is not None)
        stats = index.stats()
        assert stats["base_generation"] == base and stats["delta_docs"] == 0
        _same_as_fts5(mem)
        _same_as_fts5(mem, VectorFilter(session_ids=["a"]))
        # A fresh engine maps base + L0 (with its tombstones of base chunks): no delta.
        # (Read-only: a writable one would purge b's deletion on close, a full merge.)
        with mindfile.open(path, read_only=True) as other:
            other.search("dog", mode="fts")
            assert _index(other).stats()["delta_docs"] == 0
            assert _index(other).stats()["base_docs"] == 125
            _same_as_fts5(other)
        first_l0 = stats["l0_generation"]
        _fill(mem, "c", 22, seed=23)  # another publish rewrites the L0 only
        _wait(lambda: index.size() > 0 and index.stats()["l0_generation"] not in (None, first_l0))
        assert index.stats()["base_generation"] == base
        _same_as_fts5(mem)
        _fill(mem, "c", 30, seed=24)  # L0 now >= half the base: folded into a new base
        _wait(lambda: index.size() > 0 and index.stats()["base_generation"] != base)
        _wait(lambda: index.size() > 0 and index.stats()["l0_generation"] is None)
        _same_as_fts5(mem)
        names = {p.name for p in (tmp_path / "m.db.index" / "bm25").iterdir()}
        assert names == {"build.lock", "manifest.json", index.stats()["base_generation"]}


@pytest.mark.usefixtures("small_merges")
def test_an_l0_publish_keeps_the_base_mapped_with_its_bounds(tmp_path: Path) -> None:
    """A new L0 names the same base: the state that takes it reuses the base this
    process maps (not mapped again) and the window bounds computed on it, and the
    writer and a reading process still answer as FTS5 does."""
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        index = _with_base(mem, 60, seed=40)
        _fill(mem, "b", 10, seed=41)
        with mindfile.open(path, read_only=True) as other:
            assert index.publish(quick=True)  # base + L0
            other.search("dog", mode="fts")
            reader = _index(other)
            _wait(lambda: reader._state.l0 is not None)
            mapped = []
            for lex in (index, reader):
                base = lex._state.base
                assert base is not None
                term = base.seg.term_index(lex.query_terms("garden")[0])
                assert term is not None
                base.bounds(term, 5.0)  # computed and cached by this process
                mapped.append(base.seg)
                l0 = lex._state.l0
                assert l0 is not None
                first_l0 = l0.seg.generation
            _fill(mem, "c", 10, seed=42)
            assert index.publish(quick=True)  # a new L0 over the same base
            other.search("dog", mode="fts")
            _wait(
                lambda: reader._state.l0 is not None and reader._state.l0.seg.generation != first_l0
            )
            for lex, seg in zip((index, reader), mapped, strict=True):
                state = lex._state
                assert state.l0 is not None and state.l0.seg.generation != first_l0
                assert state.base is not None and state.base.seg is seg
                assert term in state.base._bounds
            _same_as_fts5(mem)
            _same_as_fts5(other)


@pytest.mark.usefixtures("small_merges")
def test_a_quick_publish_writes_an_l0_even_past_l0_fraction(tmp_path: Path) -> None:
    """The end of a bulk ingest (mindfile._publish): ``publish(quick=True)`` adds what
    is new as an L0 generation, the quickest to write, even when the L0 has outgrown
    ``L0_FRACTION`` of the base, which a normal publish folds into a new base."""
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        _fill(mem, "a", 40, seed=30)
        index = _index(mem)
        assert index.merge()
        base = index.stats()["base_generation"]
        _fill(mem, "b", 30, seed=31)  # 30 recent >= L0_FRACTION (0.25) of 40
        assert index.publish(quick=True)
        stats = index.stats()
        assert stats["base_generation"] == base and stats["l0_generation"] is not None
        assert stats["delta_docs"] == 0
        _same_as_fts5(mem)
        with mindfile.open(path, read_only=True) as other:  # maps base + L0: no delta
            other.search("dog", mode="fts")
            assert _index(other).stats()["delta_docs"] == 0
            _same_as_fts5(other)
        _fill(mem, "c", 30, seed=32)
        assert index.publish()  # a normal publish folds them into a new base
        assert index.stats()["base_generation"] != base
        assert index.stats()["l0_generation"] is None
        _same_as_fts5(mem)


@pytest.mark.usefixtures("small_merges")
@pytest.mark.parametrize("full", [True, False])
def test_what_is_tokenised_during_a_merge_is_taken_over_not_tokenised_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, full: bool
) -> None:
    """While a merge writes its generation, writes go on and are tokenised into the
    live delta (new chunks, a base chunk whose neighbour context changes, a deleted
    session, published and frozen). The state on the new generation takes that delta
    over, with tombstones for the published copies removed meanwhile: no chunk is
    tokenised a second time, and ranking stays FTS5's."""
    monkeypatch.setattr(lexical, "MERGE_MIN", 10_000)  # no merge but the test's own
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        index = _index(mem)
        _fill(mem, "a", 40, seed=50)
        _fill(mem, "b", 20, seed=51)
        assert index.merge()
        _fill(mem, "c", 25, seed=52)  # in the delta the merge freezes
        index._catch_up(merge=False)
        tokenised: list[str] = []
        real_tokens = index._analyzer.tokens

        def counting(text: str) -> list[str]:
            tokenised.append(text)
            return real_tokens(text)

        monkeypatch.setattr(index._analyzer, "tokens", counting)
        real_write = lexical.write_generation
        during: list[int] = []

        def write_while_writing(*args: object, **kwargs: object) -> object:
            manifest = real_write(*args, **kwargs)  # type: ignore[arg-type]
            _fill(mem, "a", 5, seed=53)  # new chunks + new context for a's last chunk
            mem.forget("b")  # published chunks
            mem.forget("c")  # frozen chunks
            _fill(mem, "d", 12, seed=54)
            index._catch_up(merge=False)  # into the live delta, as the helper's loop does
            during.append(len(tokenised))
            return manifest

        monkeypatch.setattr(lexical, "write_generation", write_while_writing)
        before = index._state
        assert index.merge() if full else index.publish(quick=True)
        assert during and during[0] > 0
        assert len(tokenised) == during[0], "chunks tokenised again after the merge"
        state = index._state
        assert state is not before and state.delta is before.delta
        assert state.manifest is not None and state.manifest.max_id == 85
        assert (full and state.l0 is None) or (not full and state.l0 is not None)
        _same_as_fts5(mem)
        _same_as_fts5(mem, VectorFilter(session_ids=["a", "d"]))
        monkeypatch.setattr(lexical, "write_generation", real_write)
        # Another engine, and this one after its next publish, agree with FTS5.
        with mindfile.open(path, read_only=True) as other:
            other.search("dog", mode="fts")
            _same_as_fts5(other)
        assert index.merge()
        _same_as_fts5(mem)
        assert index.stats()["delta_docs"] == 0


@pytest.mark.usefixtures("small_merges")
def test_a_background_publish_lets_the_caller_go_on_and_others_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``publish(when_due=True, wait=False)`` (the bulk ingest's index helper) starts the
    merge in a thread and returns; a quick publish meanwhile waits for it (its frozen
    deltas are published once) and then publishes what came after."""
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        index = _index(mem)
        _fill(mem, "a", 40, seed=60)
        assert index.merge()
        release = threading.Event()
        real_write = lexical.write_generation
        writes: list[int] = []

        def slow_write(*args: object, **kwargs: object) -> object:
            frozen = args[1]
            assert isinstance(frozen, Frozen)
            writes.append(frozen.max_id)
            if len(writes) == 1:
                assert release.wait(20)
            return real_write(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(lexical, "write_generation", slow_write)
        _fill(mem, "b", 30, seed=61)
        assert index.publish(when_due=True, wait=False)
        _wait(lambda: bool(writes))
        _fill(mem, "c", 10, seed=62)
        assert index.publish(when_due=True, wait=False)  # one runs: True at once
        done: list[bool] = []
        quick = threading.Thread(target=lambda: done.append(index.publish(quick=True)))
        quick.start()
        time.sleep(0.2)
        assert not done and writes == [70]  # waits for the running merge
        release.set()
        quick.join(20)
        assert done == [True] and writes == [70, 80]
        assert index.stats()["delta_docs"] == 0
        _same_as_fts5(mem)
        # The fold into one base, in the background too (the helper, writes paused).
        base = index.stats()["base_generation"]
        assert index.stats()["l0_generation"] is not None
        assert index.merge(wait=False)
        _fill(mem, "d", 10, seed=63)  # written meanwhile: caught up, taken over
        index._catch_up(merge=False)
        _wait(lambda: index._merger is None)
        stats = index.stats()
        assert stats["base_generation"] != base and stats["l0_generation"] is None
        _same_as_fts5(mem)


@pytest.mark.usefixtures("small_merges")
def test_a_helper_publishing_in_the_background_while_threads_write_stays_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index helper's loop (catch up, start a background merge when due, never
    wait) beside writers that add and forget and searching threads: every state swapped
    in ranks as FTS5 does at the end, and so does a process that maps what it published."""
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        _fill(mem, "s0", 30, seed=70)
        index = _index(mem)
        assert index.merge()
        started: list[bool] = []
        carried: list[bool] = []
        real_carry = index._carry

        def carry(*args: Any) -> bool:
            carried.append(real_carry(*args))
            return carried[-1]

        monkeypatch.setattr(index, "_carry", carry)

        def writer(i: int) -> Callable[[], None]:
            def write() -> None:
                for round_ in range(24):
                    _fill(mem, f"s{i}", 12, seed=200 * i + round_)
                    if round_ % 8 == 5:
                        mem.forget(f"s{i}")
                    time.sleep(0.005)

            return write

        def helper() -> None:
            started.append(index.publish(when_due=True, wait=False))

        _concurrently([writer(1), writer(2), writer(3)], [helper] + [_searching(index)] * 2)
        assert any(started) and any(carried), (started.count(True), carried)
        assert index.publish(quick=True)  # waits for a merge still running
        _same_as_fts5(mem)
        with mindfile.open(path, read_only=True) as other:
            other.search("dog", mode="fts")
            _same_as_fts5(other)


@pytest.mark.usefixtures("small_merges")
def test_a_quick_publish_stops_a_background_full_merge_instead_of_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """When an ingest ends during a full merge (seconds at ~150k chunks), the helper's
    quick publish stops it and publishes its deltas in an L0 generation at once; the
    full merge is no failure (no error, no retry delay) and runs again later."""
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        index = _with_base(mem, 40, seed=100)
        _fill(mem, "b", 10, seed=101)
        assert index.publish(quick=True)  # an L0 of 10: the next publish would be full
        real_merge = lexical_publish.merge
        merging = threading.Event()

        def slow_full_merge(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("extra") is not None:  # a full merge: long, until cancelled
                merging.set()
                cancelled = kwargs["cancelled"]
                assert cancelled is not None
                deadline = time.monotonic() + 20
                while not cancelled() and time.monotonic() < deadline:
                    time.sleep(0.01)
            return real_merge(*args, **kwargs)

        monkeypatch.setattr(lexical_publish, "merge", slow_full_merge)
        _fill(mem, "c", 30, seed=102)
        assert index.publish(when_due=True, wait=False)  # due: full, in the background
        assert merging.wait(20)
        _fill(mem, "d", 5, seed=103)  # the writes go on, then pause: a quick publish
        base = index.stats()["base_generation"]
        started = time.monotonic()
        with caplog.at_level("INFO", logger="mindfile.retrieve"):
            assert index.publish(quick=True)
        assert time.monotonic() - started < 10
        assert "gave way" in caplog.text and "failed" not in caplog.text
        stats = index.stats()
        assert stats["base_generation"] == base and stats["l0_generation"] is not None
        assert stats["delta_docs"] == 0 and index._merge_failed_at is None
        manifest = lexical.LexManifest.load(tmp_path / "m.db.index" / "bm25" / lexical.MANIFEST)
        assert manifest is not None and manifest.max_id == 85
        _same_as_fts5(mem)
        # The fold runs again later (a foreground merge cannot be stopped this way).
        monkeypatch.setattr(lexical_publish, "merge", real_merge)
        assert index.merge()
        assert index.stats()["base_generation"] != base and index.stats()["l0_generation"] is None
        _same_as_fts5(mem)


@pytest.mark.usefixtures("small_merges")
def test_a_generation_removed_by_a_newer_publish_is_not_taken_for_damage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A reader that read a manifest just before a publisher replaced it (and removed
    the L0 generation it no longer names) finds a file missing: that is a race, not
    damage. The reader marks nothing broken, warns of nothing, and takes the newer
    manifest, though it names the same base."""
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        index = _with_base(mem, 60, seed=80)
        _fill(mem, "b", 10, seed=81)
        assert index.publish(quick=True)
        folder = tmp_path / "m.db.index" / "bm25"
        read = lexical.LexManifest.load(folder / lexical.MANIFEST)
        assert read is not None and read.l0 is not None
        _fill(mem, "c", 10, seed=82)
        assert index.publish(quick=True)  # a new L0; the one ``read`` names is removed
        assert not (folder / read.l0).exists()
        with mindfile.open(path, read_only=True) as other:
            reader = _index(other)
            with caplog.at_level("WARNING", logger="mindfile.retrieve"):
                assert reader._open(read) is None
            assert not reader._broken and "ignoring" not in caplog.text
            other.search("dog", mode="fts")
            _wait(lambda: reader._state.l0 is not None)
            assert reader._state.manifest == lexical.LexManifest.load(folder / lexical.MANIFEST)
            _same_as_fts5(other)


def test_a_merge_takes_over_a_live_delta_full_of_tombstones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """During an ingest the live delta gathers tombstones by itself (each new event
    changes its predecessor's neighbour context: the chunk is re-added), past the share
    that makes a state due for compaction. The generation published meanwhile must
    still take it over: keeping the old state would publish its frozen delta again."""
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        index = _index(mem)
        _fill(mem, "a", 50, seed=90)
        assert index.merge()
        _fill(mem, "b", 30, seed=91)
        index._catch_up(merge=False)
        real_write = lexical.write_generation

        def write_while_writing(*args: object, **kwargs: object) -> object:
            manifest = real_write(*args, **kwargs)  # type: ignore[arg-type]
            for i in range(1, 1201):  # each, caught up, re-adds its predecessor
                mem.store("c", i, f"turn {i} " + WORDS[i % len(WORDS)])
                index._catch_up(merge=False)
            return manifest

        monkeypatch.setattr(lexical, "write_generation", write_while_writing)
        before = index._state
        assert index.publish(quick=True)
        state = index._state
        assert before.delta.dead > 1024 and state.delta is before.delta
        assert state is not before and not state.frozen
        assert state.manifest is not None and state.manifest.max_id == 80
        monkeypatch.setattr(lexical, "write_generation", real_write)
        _same_as_fts5(mem)


def test_a_reader_switches_to_a_new_generation_though_its_delta_is_full_of_tombstones(
    tmp_path: Path,
) -> None:
    """A searching process catches a newly published generation up while the ingest
    goes on: its delta gathers tombstones by itself (each new event changes its
    predecessor's context), as the one it holds does. They do not make the new state
    worse than the held one (the next publish drops them): it must switch, not keep
    the old generation and a delta that only grows."""
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem, mindfile.open(path) as other:
        _with_base(mem, 50, seed=95)
        reader = _index(other)
        reader.size()  # maps the base
        held = reader._state
        assert held.manifest is not None and held.manifest.max_id == 50
        _fill(mem, "b", 30, seed=96)
        assert _index(mem).publish(quick=True)  # a new generation (an L0)
        manifest = lexical.LexManifest.load(tmp_path / "m.db.index" / "bm25" / lexical.MANIFEST)
        assert manifest is not None and manifest.l0 is not None
        fresh = reader._open(manifest)
        assert fresh is not None
        for i in range(1, 1201):  # caught up event by event, as writes arrive
            mem.store("c", i, f"turn {i} " + WORDS[i % len(WORDS)])
            read = reader._read_changes(fresh)
            assert read is not None and reader._apply(fresh, read)
        assert fresh.delta.dead > 1024 and fresh.compact_soon()
        assert not fresh.published_compact_soon()
        reader._adopt(fresh)
        assert reader._state is fresh
        _same_as_fts5(other)


@pytest.mark.usefixtures("small_merges")
def test_a_merge_waits_for_a_background_merge_that_is_still_starting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A foreground merge joins the background one: it must not see that thread between
    its creation and its start (``join`` raises then; found by the thread stress test)."""
    with mindfile.open(tmp_path / "m.db", embedder="hash") as mem:
        index = _with_base(mem, 40, seed=100)
        _fill(mem, "b", 30, seed=101)
        index._catch_up(merge=False)
        starting = threading.Event()

        class SlowStart(threading.Thread):
            def start(self) -> None:
                starting.set()
                time.sleep(0.3)
                super().start()

        plain = threading.Thread
        with monkeypatch.context() as patched:
            patched.setattr(threading, "Thread", SlowStart)  # the merge thread's class
            background = plain(target=index._start_merge)
            background.start()
            assert starting.wait(5)
        assert index.publish(quick=True) or index.stats()["delta_docs"] == 0
        background.join()
        _wait(lambda: index._merger is None)
        _same_as_fts5(mem)
