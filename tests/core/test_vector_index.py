"""One conformance suite for every :class:`~mindfile.vector.VectorIndex`.

Each index must return exactly what a brute-force numpy scan of ``chunks_vec`` returns,
stay correct while this process or another one writes and forgets, and rebuild to the
same answers.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

import mindfile
from mindfile.vector import VectorFilter
from mindfile.vector.exact_disk import ExactDiskIndex
from mindfile.vector.lance_index import LanceIndex
from mindfile.vector.zvec_index import ZvecIndex

from ._support import assert_consistent, assert_same_ranking, oracle

INDEXES = ["exact", "sqlite-vec", "zvec", "lancedb"]
#: The on-disk ANN indexes (a base on disk plus an exact in-memory delta, merged).
ANN = ["zvec", "lancedb"]
DIMS = 16
SESSIONS = ["a", "b", "c", "d"]


@pytest.fixture(autouse=True)
def merge_eagerly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fold every change into the on-disk base at once, in the calling thread, so these
    small stores exercise the ANN base and not only the exact delta.

    At these sizes (at most a few hundred vectors) HNSW with ef=300 and LanceDB's flat
    scan (no IVF index below 4,096 rows) find the exact neighbours, and every score is
    rescored from SQLite: the same oracle and tolerance as the exact indexes apply."""
    for cls in (ZvecIndex, LanceIndex, ExactDiskIndex):
        monkeypatch.setattr(cls, "min_delta", 0)
        monkeypatch.setattr(cls, "background", False)


@pytest.fixture(params=INDEXES)
def index_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def unit(seed: int, dims: int = DIMS) -> npt.NDArray[np.float32]:
    v = np.random.default_rng(seed).standard_normal(dims).astype(np.float32)
    return v / np.linalg.norm(v)


def fill(mem: mindfile.Mindfile, n: int, sessions: list[str] = SESSIONS) -> None:
    events = [(sessions[i % len(sessions)], i, f"memory number {i} of {n}") for i in range(n)]
    mem.store_many(events)


def check(
    mem: mindfile.Mindfile,
    query: npt.NDArray[np.float32],
    k: int,
    *,
    sessions: list[str] | None = None,
    rowids: list[int] | None = None,
) -> None:
    where = None
    if sessions is not None or rowids is not None:
        where = VectorFilter(
            session_ids=sessions,
            rowids=None if rowids is None else np.array(rowids, dtype=np.int64),
        )
    got = mem.index.search(query, k, where=where)
    full = oracle(mem, query, 10**9, sessions=sessions, rowids=rowids)
    assert_same_ranking(got, full, k)


# -- property: random histories against the oracle -----------------------------------------


class IndexMachine(RuleBasedStateMachine):
    index_name = "exact"
    #: A store file instead of ":memory:" ("exact" maps its arrays from disk only then).
    in_file = False

    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.mkdtemp(prefix="mindfile-machine-") if self.in_file else None
        where = ":memory:" if self.folder is None else str(Path(self.folder) / "m.db")
        self.mem = mindfile.open(where, embedder=f"hash:{DIMS}", vector_index=self.index_name)
        self.next_seq = dict.fromkeys(SESSIONS, 0)

    def teardown(self) -> None:
        self.mem.close()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _rowids(self) -> list[int]:
        return [int(r[0]) for r in self.mem.db.query("SELECT chunk_rowid FROM chunks_vec")]

    @rule(session=st.sampled_from(SESSIONS), texts=st.lists(st.text(min_size=1), max_size=4))
    def store(self, session: str, texts: list[str]) -> None:
        events = []
        for text in texts:
            events.append((session, self.next_seq[session], text))
            self.next_seq[session] += 1
        self.mem.store_many(events)

    @rule(session=st.sampled_from(SESSIONS))
    def forget(self, session: str) -> None:
        self.mem.forget(session)
        self.next_seq[session] = 0

    @rule()
    def rebuild(self) -> None:
        self.mem.rebuild_index()

    @rule(seed=st.integers(0, 2**32), k=st.integers(0, 12))
    def search_all(self, seed: int, k: int) -> None:
        check(self.mem, unit(seed), k)

    @rule(
        seed=st.integers(0, 2**32),
        k=st.integers(1, 12),
        sessions=st.lists(st.sampled_from([*SESSIONS, "nobody"]), max_size=3, unique=True),
    )
    def search_sessions(self, seed: int, k: int, sessions: list[str]) -> None:
        check(self.mem, unit(seed), k, sessions=sessions)

    @precondition(lambda self: bool(self._rowids()))
    @rule(seed=st.integers(0, 2**32), k=st.integers(1, 12), data=st.data())
    def search_rowids(self, seed: int, k: int, data: st.DataObject) -> None:
        ids = data.draw(st.lists(st.sampled_from(self._rowids()), unique=True))
        sessions = data.draw(st.none() | st.lists(st.sampled_from(SESSIONS), unique=True))
        check(self.mem, unit(seed), k, sessions=sessions, rowids=ids)

    @rule(seed=st.integers(0, 2**32), k=st.integers(1, 8))
    def engine_vector_search(self, seed: int, k: int) -> None:
        query = unit(seed)
        hits = self.mem.search("q", mode="vector", top_k=k, query_embedding=query.tolist())
        full = oracle(self.mem, query, 10**9)
        id_of = dict(self.mem.db.query("SELECT chunk_id, id FROM chunks"))
        got = [(int(id_of[h.chunk_id]), float(h.breakdown.vector or 0.0)) for h in hits]
        assert_same_ranking(got, full, k)

    @rule()
    def size_matches(self) -> None:
        assert self.mem.index.size() == len(self._rowids())


@pytest.mark.parametrize(("name", "in_file"), [*((n, False) for n in INDEXES), ("exact", True)])
def test_index_matches_brute_force_oracle(name: str, in_file: bool) -> None:
    attrs = {"index_name": name, "in_file": in_file}
    machine = type(f"Machine_{name}_{in_file}", (IndexMachine,), attrs)
    run_state_machine_as_test(
        machine, settings=settings(max_examples=20, stateful_step_count=20, deadline=None)
    )


# -- plain conformance ---------------------------------------------------------------------


def test_empty_index(index_name: str) -> None:
    with mindfile.open(":memory:", embedder=f"hash:{DIMS}", vector_index=index_name) as mem:
        assert mem.index.size() == 0
        assert mem.index.search(unit(1), 5) == []
        assert mem.search("anything", mode="vector") == []


def test_scores_are_cosine_similarities(index_name: str) -> None:
    with mindfile.open(":memory:", embedder="hash", vector_index=index_name) as mem:
        mem.store("s", 1, "exactly this text")
        mem.store("s", 2, "something unrelated")
        query = mem.embedder.embed_query("exactly this text")
        (best_id, best), (_, other) = mem.index.search(query, 2)
        assert best == pytest.approx(1.0, abs=1e-5)
        assert -1.0 <= other < 0.5
        assert mem.db.scalar("SELECT chunk_text FROM chunks WHERE id = ?", (best_id,)) == (
            "exactly this text"
        )


def test_k_larger_than_the_store_and_zero(index_name: str) -> None:
    with mindfile.open(":memory:", embedder=f"hash:{DIMS}", vector_index=index_name) as mem:
        fill(mem, 7)
        check(mem, unit(3), 100)
        assert mem.index.search(unit(3), 0) == []
        check(mem, unit(4), 3, sessions=[])
        check(mem, unit(4), 3, rowids=[])


def test_zero_vector_scores_zero(index_name: str, db_path: Path) -> None:
    """The bundled model embeds text without a known token (an emoji) as all zeros."""
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=index_name) as mem:
        fill(mem, 12)
        mem.store("z", 1, "\U0001f9d8")
        rowid = int(mem.db.scalar("SELECT id FROM chunks WHERE session_id = 'z'"))
        with mem.db.atomic():
            mem.db.execute(
                "UPDATE chunks_vec SET embedding_blob = ? WHERE chunk_rowid = ?",
                (np.zeros(DIMS, dtype="<f4").tobytes(), rowid),
            )
        got = dict(mem.index.search(unit(3), 50))
        assert got[rowid] == 0.0
        check(mem, unit(3), 50)
        check(mem, unit(4), 13, sessions=["z", "a"])


def test_rebuild_gives_the_same_results(index_name: str, db_path: Path) -> None:
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=index_name) as mem:
        fill(mem, 60)
        mem.forget("b")
        before = [mem.index.search(unit(s), 10) for s in range(5)]
        mem.rebuild_index()
        assert [mem.index.search(unit(s), 10) for s in range(5)] == before
        assert mem.index.size() == 45


def test_a_filter_of_many_sessions(index_name: str, db_path: Path) -> None:
    """A user's sessions: more than a few session ids in one filter (the exact index
    then matches them through its rows' session ordinals), before and after more rows
    and sessions arrive, with and without rowids."""
    many = [f"session-{i}" for i in range(40)]
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=index_name) as mem:
        fill(mem, 200, many)
        wanted = [*many[::2], "nobody"]  # 21 sessions, one of them unknown
        for seed in range(4):
            check(mem, unit(seed), 15, sessions=wanted)
            check(mem, unit(seed), 15, sessions=many[:3])
        fill(mem, 80, [f"later-{i}" for i in range(20)])
        rowids = [int(r[0]) for r in mem.db.query("SELECT chunk_rowid FROM chunks_vec")][::3]
        for seed in range(4):
            check(mem, unit(seed), 15, sessions=[*wanted, "later-1", "later-2"])
            check(mem, unit(seed), 15, sessions=wanted, rowids=rowids)


@pytest.mark.parametrize("persisted", ["sqlite-vec", *ANN])
def test_persisted_index_catches_up_after_writes_made_without_it(
    persisted: str, db_path: Path
) -> None:
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=persisted) as mem:
        fill(mem, 20)
        assert mem.index.size() == 20
    with mindfile.open(db_path, vector_index="exact") as mem:  # the persisted index goes stale
        mem.forget("a")
        mem.store("e", 1, "written while the persisted index was not looking")
    with mindfile.open(db_path, vector_index=persisted) as mem:
        assert mem.index.size() == 16
        for seed in range(5):
            check(mem, unit(seed), 8)
        check(mem, unit(9), 8, sessions=["e", "b"])
        assert_consistent(mem)


# -- other writers -------------------------------------------------------------------------


def test_second_connection_in_process(index_name: str, db_path: Path) -> None:
    with (
        mindfile.open(db_path, embedder="hash", vector_index=index_name) as first,
        mindfile.open(db_path, vector_index=index_name) as second,
    ):
        first.store("a", 1, "apples from the first connection")
        first.store("b", 1, "bananas from the first connection")
        assert len(first.search("q", mode="vector")) == 2  # warm the index
        second.store("c", 1, "cherries from the second connection")
        second.forget("a")
        hits = first.search("cherries from the second connection", mode="vector")
        assert hits[0].session_id == "c"
        assert hits[0].breakdown.vector == pytest.approx(1.0, abs=1e-5)
        assert {h.session_id for h in hits} == {"b", "c"}
        assert first.index.size() == 2
        check(first, first.embedder.embed_query("bananas"), 5)
        check(first, first.embedder.embed_query("cherries"), 5, sessions=["c"])


WRITER = textwrap.dedent(
    """
    import sys
    import mindfile

    path, index = sys.argv[1], sys.argv[2]
    with mindfile.open(path, vector_index=index) as mem:
        mem.store("c", 1, "cherries from another process")
        mem.store_many([("d", i, f"durian {i} from another process") for i in range(30)])
        mem.forget("a")
    """
)


def test_another_process_writes_and_forgets(index_name: str, db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash", vector_index=index_name) as mem:
        mem.store("a", 1, "apples from this process")
        mem.store("b", 1, "bananas from this process")
        assert len(mem.search("q", mode="vector")) == 2
        subprocess.run(
            [sys.executable, "-c", WRITER, str(db_path), index_name],
            check=True,
            capture_output=True,
            timeout=120,
        )
        hits = mem.search("cherries from another process", mode="vector", top_k=50)
        assert hits[0].session_id == "c"
        assert "a" not in {h.session_id for h in hits}
        assert len(hits) == 32
        assert mem.index.size() == 32
        check(mem, mem.embedder.embed_query("durian 7 from another process"), 10)
        check(mem, unit(5, 256), 10, sessions=["d", "a"])
        assert mem.search("apples", mode="fts") == []
        assert_consistent(mem)


def test_threads_share_one_engine(index_name: str, db_path: Path) -> None:
    errors: list[BaseException] = []
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=index_name) as mem:

        def writer(session: str) -> None:
            try:
                for i in range(25):
                    mem.store(session, i, f"{session} says thing {i}")
                    if i % 5 == 0:
                        mem.search(f"thing {i}", session_id=session)
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(f"t{n}",)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert mem.index.size() == 100
        for seed in range(3):
            check(mem, unit(seed), 10, sessions=["t1", "t3"])
        assert_consistent(mem)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(-50, 50), max_size=40),
    st.lists(st.integers(-60, 60), max_size=30),
)
def test_members_and_ascending_agree_with_sets(allowed: list[int], values: list[int]) -> None:
    """The filters' membership test (binary search over the allowed rowids, sorted once
    by ``ascending``) answers as a Python set does, in any order and with repeats."""
    from mindfile.vector.base import ascending, members

    sorted_allowed = ascending(allowed)
    assert sorted_allowed.tolist() == sorted(set(allowed))
    assert ascending(sorted_allowed) is sorted_allowed  # already ascending: kept as is
    got = members(np.asarray(values, dtype=np.int64), sorted_allowed)
    assert got.tolist() == [v in set(allowed) for v in values]
