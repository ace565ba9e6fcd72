"""The on-disk ANN indexes (``zvec``, ``lancedb``): where the base lives, how processes
share it, and that a missing, damaged, stale or half-written base never gives wrong
results (the conformance suite in test_vector_index.py covers the search contract)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

import mindfile
from mindfile.embed.base import to_blob
from mindfile.errors import ConfigError
from mindfile.vector import VectorFilter, _simd
from mindfile.vector import ann as ann_module
from mindfile.vector.ann import MANIFEST, AnnIndex, Manifest
from mindfile.vector.exact import ExactIndex
from mindfile.vector.exact_disk import ExactDiskIndex
from mindfile.vector.lance_index import LanceIndex
from mindfile.vector.zvec_index import ZvecIndex

from ._support import assert_same_ranking, oracle

#: "exact" on a store file: the exact index's arrays published and mapped the same way.
ANN = ["zvec", "lancedb", "exact"]
DIMS = 16
SESSIONS = ["a", "b", "c", "d"]


@pytest.fixture(params=ANN)
def ann(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def merge_eagerly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every change is folded into the on-disk base at once, in the calling thread."""
    for cls in (ZvecIndex, LanceIndex, ExactDiskIndex):
        monkeypatch.setattr(cls, "min_delta", 0)
        monkeypatch.setattr(cls, "background", False)


def unit(seed: int, dims: int = DIMS) -> npt.NDArray[np.float32]:
    v = np.random.default_rng(seed).standard_normal(dims).astype(np.float32)
    return v / np.linalg.norm(v)


def fill(mem: mindfile.Mindfile, n: int, start: int = 0) -> None:
    mem.store_many(
        [(SESSIONS[i % len(SESSIONS)], i, f"memory number {i}") for i in range(start, start + n)]
    )


def check(
    mem: mindfile.Mindfile,
    query: npt.NDArray[np.float32],
    k: int,
    sessions: list[str] | None = None,
) -> None:
    where = None if sessions is None else VectorFilter(session_ids=sessions)
    got = mem.index.search(query, k, where=where)
    assert_same_ranking(got, oracle(mem, query, 10**9, sessions=sessions), k)


def check_all(mem: mindfile.Mindfile) -> None:
    for seed in range(6):
        check(mem, unit(seed), 10)
    check(mem, unit(7), 5, sessions=["b", "c"])
    assert mem.index.size() == int(mem.db.scalar("SELECT count(*) FROM chunks_vec"))


def index(mem: mindfile.Mindfile) -> AnnIndex:
    assert isinstance(mem.index, AnnIndex)
    return mem.index


def folder(db_path: Path, name: str) -> Path:
    return db_path.with_name(db_path.name + ".index") / name


def published(db_path: Path, name: str) -> Manifest:
    manifest = Manifest.load(folder(db_path, name) / MANIFEST)
    assert manifest is not None
    return manifest


def test_base_lives_next_to_the_store_and_is_shared(ann: str, db_path: Path) -> None:
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        fill(mem, 40)
        check_all(mem)
        manifest = published(db_path, ann)
        assert (manifest.backend, manifest.dims, manifest.count) == (ann, DIMS, 40)
        assert manifest.model == mem.embedder.model_id
        assert manifest.max_id == int(mem.db.scalar("SELECT max(id) FROM chunks"))
        with mindfile.open(db_path, vector_index=ann) as other:
            check_all(other)
            # The second engine reads the published base: nothing of its own in memory.
            assert index(other)._reader is not None
            assert index(other)._reader.manifest == manifest  # type: ignore[union-attr]
            assert len(index(other)._delta) == 0


@pytest.mark.parametrize("ann", ["zvec", "lancedb"])
def test_in_memory_store_uses_a_temporary_folder(ann: str) -> None:
    with mindfile.open(":memory:", embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        fill(mem, 20)
        check_all(mem)
        where = index(mem).folder
        assert (where / MANIFEST).is_file()
    assert not where.exists()


def test_rewritten_and_deleted_vectors(ann: str, db_path: Path) -> None:
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        fill(mem, 40)
        check_all(mem)
        target = unit(99)
        ids = [int(r[0]) for r in mem.db.query("SELECT chunk_rowid FROM chunks_vec LIMIT 3")]
        other = mindfile.open(db_path, vector_index="exact")  # another connection
        with other, other.db.atomic():
            other.db.execute(
                "UPDATE chunks_vec SET embedding_blob = ? WHERE chunk_rowid = ?",
                (to_blob(target), ids[0]),
            )
            other.db.execute("DELETE FROM chunks_vec WHERE chunk_rowid = ?", (ids[1],))
        best = mem.index.search(target, 3)
        assert best[0][0] == ids[0] and best[0][1] == pytest.approx(1.0, abs=1e-5)
        assert ids[1] not in {i for i, _ in mem.index.search(target, 50)}
        check_all(mem)


def test_another_process_merges_while_this_one_reads(ann: str, db_path: Path) -> None:
    writer = textwrap.dedent(
        """
        import sys
        import mindfile
        from mindfile.vector.exact_disk import ExactDiskIndex
        from mindfile.vector.lance_index import LanceIndex
        from mindfile.vector.zvec_index import ZvecIndex

        for cls in (ZvecIndex, LanceIndex, ExactDiskIndex):
            cls.min_delta, cls.background = 0, False
        path, index = sys.argv[1], sys.argv[2]
        with mindfile.open(path, vector_index=index) as mem:
            mem.store_many([("e", i, f"from the other process {i}") for i in range(30)])
            mem.forget("a")
            mem.search("anything", mode="vector")  # catches up: merges and publishes
        """
    )
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        fill(mem, 40)
        check_all(mem)
        before = published(db_path, ann)
        subprocess.run(
            [sys.executable, "-c", writer, str(db_path), ann],
            check=True,
            capture_output=True,
            timeout=120,
        )
        after = published(db_path, ann)
        assert after.generation != before.generation and after.count == 60
        check_all(mem)
        check(mem, unit(3), 10, sessions=["e", "a"])
        assert index(mem)._reader.manifest == after  # type: ignore[union-attr]
        assert len(index(mem)._delta) == 0


def test_a_newer_base_keeps_the_rows_held_above_it(
    ann: str, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that switches to a generation published from an older view of the store
    (a publisher's merge reads for seconds while the ingest goes on) keeps the rows it
    already holds above that base instead of reading them again, and applies what changed
    since the base's log position to the rows the base holds."""
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as writer:
        index(writer).min_delta = 10**9  # publishes only when told to
        fill(writer, 60)
        assert writer.index.merge()
        base = published(db_path, ann)
        hidden = folder(db_path, ann) / "manifest.later"
        (folder(db_path, ann) / MANIFEST).rename(hidden)  # not seen by the reader yet
        with mindfile.open(db_path, vector_index=ann) as reader:
            index(reader).min_delta = 10**9
            fill(writer, 40, start=60)
            ids = [int(r[0]) for r in writer.db.query("SELECT id FROM chunks ORDER BY id")]
            target = unit(99)
            with writer.db.atomic():  # two rows the base holds: one rewritten, one gone
                writer.db.execute(
                    "UPDATE chunks_vec SET embedding_blob = ? WHERE chunk_rowid = ?",
                    (to_blob(target), ids[5]),
                )
                writer.db.execute("DELETE FROM chunks_vec WHERE chunk_rowid = ?", (ids[7],))
            check_all(reader)  # no base: every row in the delta
            assert index(reader)._reader is None and len(index(reader)._delta) == 99
            hidden.rename(folder(db_path, ann) / MANIFEST)
            read: list[int] = []
            real = ann_module.read_after
            monkeypatch.setattr(
                ann_module,
                "read_after",
                lambda *a, **k: read.append(len(got := real(*a, **k))) or got,
            )
            check_all(reader)
            delta = index(reader)._delta
            assert index(reader)._reader.manifest == base  # type: ignore[union-attr]
            assert sum(read) == 0  # the 40 rows above the base were kept, not read again
            assert delta.tombstones == {ids[5], ids[7]}
            assert sorted(delta.rows) == [ids[5], *ids[60:]]
            best = reader.index.search(target, 1)
            assert best[0][0] == ids[5]
            assert ids[7] not in {i for i, _ in reader.index.search(unit(1), 100)}
            fill(writer, 5, start=100)  # and it goes on catching up from there
            check_all(reader)
            assert sum(read) == 5


def test_a_backlog_is_read_a_page_at_a_time_without_the_database_lock_between(
    ann: str, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catch-up over a long backlog holds the database lock for one page at a time:
    another thread takes it between pages, and what another connection writes meanwhile
    (rows already read rewritten or deleted, rows not read yet likewise, new rows) is in
    the results once the catch-up is over."""
    monkeypatch.setattr(ann_module, "CATCH_UP_PAGE", 7)
    read: list[int] = []
    real = ann_module.read_after
    monkeypatch.setattr(
        ann_module, "read_after", lambda *a, **k: read.append(len(got := real(*a, **k))) or got
    )
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        index(mem).min_delta = 10**9  # no base: the backlog is every row
        fill(mem, 100)
        ids = [int(r[0]) for r in mem.db.query("SELECT id FROM chunks ORDER BY id")]
        target, other_target = unit(99), unit(98)
        other = mindfile.open(db_path, vector_index="exact")
        gaps: list[bool] = []

        def between_pages() -> None:
            assert not mem.db.held_by_me()
            taker = threading.Thread(target=lambda: mem.db.lock.acquire() and mem.db.lock.release())
            taker.start()
            taker.join(timeout=10)
            gaps.append(not taker.is_alive())
            if len(gaps) == 3:  # rows 0-20 are read: change some of them and some later
                with other.db.atomic():
                    for row, vector in ((ids[2], target), (ids[90], other_target)):
                        other.db.execute(
                            "UPDATE chunks_vec SET embedding_blob = ? WHERE chunk_rowid = ?",
                            (to_blob(vector), row),
                        )
                    for row in (ids[4], ids[80]):
                        other.db.execute("DELETE FROM chunks_vec WHERE chunk_rowid = ?", (row,))
                fill(other, 5, start=100)

        monkeypatch.setattr(AnnIndex, "_between_pages", staticmethod(between_pages))
        read.clear()
        with other:
            check_all(mem)
        assert max(read) == 7 and sum(read) == 100 - 1 + 5  # ids[80]'s row was never read
        assert len(gaps) >= 14 and all(gaps)
        assert mem.index.search(target, 1)[0][0] == ids[2]
        assert mem.index.search(other_target, 1)[0][0] == ids[90]
        hits = {i for i, _ in mem.index.search(unit(1), 200)}
        assert ids[4] not in hits and ids[80] not in hits and len(hits) == 103


def test_a_merge_leaves_rows_written_while_it_reads_to_the_next_delta(
    ann: str, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge folds in the rows up to the highest chunk id when it read the change log,
    not those another process writes while it reads (during a bulk ingest, thousands):
    those are ids above the new base, read by every delta as new rows. Before, the merge
    read them too, so every process held them again as *tombstones* of the base (logged
    after its position), and each search excluded them inside the ANN library (zvec:
    ~2 ms per 1,000 excluded ids a search at 117k chunks)."""
    monkeypatch.setattr(ann_module, "READ_BATCH", 10)
    real = ann_module.read_after
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        index(mem).min_delta = 10**9  # publishes only when told to
        fill(mem, 40)
        other = mindfile.open(db_path, vector_index="exact")
        written: list[int] = []

        def read_then_write(*args: object, **kwargs: object) -> object:
            got = real(*args, **kwargs)  # type: ignore[arg-type]
            if len(written) < 3:  # another process goes on writing between two batches
                fill(other, 10, start=40 + 10 * len(written))
                written.append(10)
            return got

        with other, monkeypatch.context() as patch:
            patch.setattr(ann_module, "read_after", read_then_write)
            assert mem.index.merge()
        manifest = published(db_path, ann)
        ids = [int(r[0]) for r in mem.db.query("SELECT id FROM chunks ORDER BY id")]
        assert len(ids) == 70
        assert (manifest.count, manifest.max_id) == (40, ids[39])
        check_all(mem)
        delta = index(mem)._delta
        assert delta.tombstones == set()
        assert sorted(delta.rows) == ids[40:]


@pytest.mark.parametrize("ann", ["zvec", "lancedb"])
def test_tombstones_are_dropped_after_the_base_search_not_excluded_inside_it(
    ann: str, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search asks the base for a few more candidates than it wants, without the
    tombstones in its filter, and drops them; only when too few are left does it ask
    again with them excluded inside the index."""
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        index(mem).min_delta = 10**9
        fill(mem, 40)
        assert mem.index.merge()
        check_all(mem)
        ids = [int(r[0]) for r in mem.db.query("SELECT id FROM chunks ORDER BY id")]

        def rewrite(rows: list[int], seed: int) -> None:
            with mem.db.atomic():
                for n, row in enumerate(rows):
                    mem.db.execute(
                        "UPDATE chunks_vec SET embedding_blob = ? WHERE chunk_rowid = ?",
                        (to_blob(unit(seed + n)), row),
                    )
            mem.index.search(unit(0), 1)  # caught up: the rows are tombstones now

        def excluded_by_each_base_search(query: npt.NDArray[np.float32], k: int) -> list[int]:
            reader = index(mem)._reader
            assert reader is not None
            real, calls = reader.candidates, []

            def spy(*args: object, **kwargs: object) -> list[int]:
                calls.append(len(kwargs["exclude"]))  # type: ignore[arg-type]
                return real(*args, **kwargs)  # type: ignore[arg-type]

            with monkeypatch.context() as patch:
                patch.setattr(reader, "candidates", spy)
                check(mem, query, k)
            return calls

        # (A search for k wants ``candidate_factor * k + margin`` of the base: 11 / 17
        # for k = 3 on zvec / lancedb, 10 / 14 for k = 2.)
        rewrite(ids[:2], 500)
        assert index(mem)._delta.tombstones == set(ids[:2])
        # The old copies of two rows: asked for 2 more, dropped, enough left.
        assert excluded_by_each_base_search(unit(3), 3) == [0]
        check_all(mem)
        rewrite(ids[2:32], 600)  # 32 of the 40 rows the base holds are stale
        # 16 more asked (26 / 30 of 40): at most 8 live ones, so a second search
        # excludes the 32 inside the index.
        assert excluded_by_each_base_search(unit(4), 2) == [0, 32]
        check_all(mem)


def test_following_a_write_reads_a_bounded_part_of_a_backlog(
    ann: str, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``follow`` (after each write of a bulk ingest) reads the pages the write filled
    and ``FOLLOW_PAGES`` more at most: a backlog this process did not write is read over
    its next writes, not inside one; the next search reads the rest."""
    monkeypatch.setattr(ann_module, "CATCH_UP_PAGE", 5)
    extra = ann_module.FOLLOW_PAGES * 5
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        index(mem).min_delta = 10**9
        fill(mem, 80)
        index(mem).follow(0)
        assert len(index(mem)._delta) == extra
        index(mem).follow(11)  # three pages for the 11 rows written, and the extra ones
        assert len(index(mem)._delta) == extra + 15 + extra
        check_all(mem)
        assert len(index(mem)._delta) == 80


def test_deleted_index_folder_is_rebuilt(ann: str, db_path: Path) -> None:
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        fill(mem, 40)
        check_all(mem)
    shutil.rmtree(db_path.with_name(db_path.name + ".index"))
    with mindfile.open(db_path, vector_index=ann) as mem:
        check_all(mem)
        assert published(db_path, ann).count == 40


def garble(path: Path) -> int:
    """Overwrite every file under ``path`` with random bytes of the same size."""
    rng = np.random.default_rng(0)
    n = 0
    for file in path.rglob("*"):
        if file.is_file() and file.name != "build.lock":
            size = max(file.stat().st_size, 64)
            file.write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
            n += 1
    return n


@pytest.mark.parametrize("keep_manifest", [False, True])
def test_garbage_filled_index_is_rebuilt(ann: str, db_path: Path, keep_manifest: bool) -> None:
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        fill(mem, 40)
        check_all(mem)
        old = published(db_path, ann)
    where = folder(db_path, ann)
    assert garble(where) > 3
    if keep_manifest:  # only the index's own files are damaged
        old.save(where / MANIFEST)
    with mindfile.open(db_path, vector_index=ann) as mem:
        fill(mem, 10, start=40)
        check_all(mem)
        new = published(db_path, ann)
        assert new.count == 50
        assert index(mem)._reader is not None


def test_manifest_of_another_model_is_not_used(ann: str, db_path: Path) -> None:
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        fill(mem, 30)
        check_all(mem)
    path = folder(db_path, ann) / MANIFEST
    data = json.loads(path.read_text())
    data["model"] = "some-other-model"
    path.write_text(json.dumps(data))
    with mindfile.open(db_path, vector_index=ann) as mem:
        check_all(mem)
        assert published(db_path, ann).model == mem.embedder.model_id


def test_manifest_from_the_future_is_not_used(ann: str, db_path: Path) -> None:
    """A store file restored from an older copy: the base holds ids the file never had."""
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        fill(mem, 30)
        check_all(mem)
    path = folder(db_path, ann) / MANIFEST
    data = json.loads(path.read_text())
    data["max_id"] += 1000
    path.write_text(json.dumps(data))
    with mindfile.open(db_path, vector_index=ann) as mem:
        check_all(mem)
        assert published(db_path, ann).max_id == 30


HANG = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import mindfile
    from mindfile.vector import ann
    from mindfile.vector.exact_disk import ExactDiskIndex
    from mindfile.vector.lance_index import LanceIndex
    from mindfile.vector.zvec_index import ZvecIndex

    for cls in (ZvecIndex, LanceIndex, ExactDiskIndex):
        cls.min_delta, cls.background = 0, False
    path, index, marker = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    ann.READ_BATCH = 8
    calls = []
    real = ann.read_after

    def read_after(db, after, dims, limit=None):
        if limit is not None:  # a merge reading its batches
            calls.append(after)
            if len(calls) == 4:
                marker.write_text("merging")
                time.sleep(120)
        return real(db, after, dims, limit)

    ann.read_after = read_after
    with mindfile.open(path, vector_index=index) as mem:
        mem.store_many([("e", i, f"late memory {i}") for i in range(60)])
        mem.forget("b")
        mem.search("anything", mode="vector")
    """
)


def test_kill_during_a_merge_leaves_a_correct_index(
    ann: str, db_path: Path, tmp_path: Path
) -> None:
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        fill(mem, 40)
        check_all(mem)
    before = published(db_path, ann)
    marker = tmp_path / "merging"
    proc = subprocess.Popen(
        [sys.executable, "-c", HANG, str(db_path), ann, str(marker)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
    assert published(db_path, ann) == before  # the half-built generation was never published
    if ann == "zvec":  # the killed merge had started writing a new generation
        assert len(list(folder(db_path, ann).glob("gen-*"))) == 2
    with mindfile.open(db_path, vector_index=ann) as mem:
        check_all(mem)
        check(mem, unit(1), 8, sessions=["e", "b"])
        after = published(db_path, ann)
        assert after != before and after.count == 90
    if ann == "zvec":  # the half-written generation and the replaced one are collected
        assert sorted(p.name for p in folder(db_path, ann).glob("gen-*")) == [after.generation]


def test_lance_versions_a_dead_merge_committed_are_ignored(db_path: Path) -> None:
    import lancedb

    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index="lancedb") as mem:
        fill(mem, 40)
        check_all(mem)
    table = lancedb.connect(str(folder(db_path, "lancedb"))).open_table("chunks")
    table.delete("rowid <= 20")  # as if a merge died after its delete, before publishing
    with mindfile.open(db_path, vector_index="lancedb") as mem:
        check_all(mem)  # the published version is pinned
        fill(mem, 5, start=40)  # the next merge starts from the published version
        check_all(mem)
        assert published(db_path, "lancedb").count == 45


def test_merges_run_in_the_background(
    ann: str, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    classes = {"zvec": ZvecIndex, "lancedb": LanceIndex, "exact": ExactDiskIndex}
    cls = classes[ann]
    monkeypatch.setattr(cls, "background", True)
    monkeypatch.setattr(cls, "min_delta", 25)
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        fill(mem, 20)
        check_all(mem)  # under the threshold: exact, from the delta
        assert index(mem)._thread is None and index(mem)._reader is None
        fill(mem, 20, start=20)
        check_all(mem)  # correct while the merge runs
        thread = index(mem)._thread
        assert thread is not None
        thread.join(timeout=120)
        assert not thread.is_alive()
        check_all(mem)
        assert index(mem)._reader is not None and len(index(mem)._delta) == 0
        assert published(db_path, ann).count == 40


@pytest.mark.parametrize(("name", "module"), [("zvec", "zvec"), ("lancedb", "lancedb")])
def test_missing_package_is_a_config_error(
    name: str, module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ConfigError, match=rf"pip install 'mindfile\[{name}\]'"):
        mindfile.open(":memory:", embedder="hash", vector_index=name)


@pytest.mark.parametrize("ann", ["zvec", "lancedb"])
def test_read_only_store_refuses_an_ann_index(ann: str, db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash") as mem:
        mem.store("a", 1, "hello")
    with pytest.raises(ConfigError):
        mindfile.open(db_path, vector_index=ann, read_only=True)


@pytest.mark.parametrize("read_only", [True, False])
def test_exact_keeps_its_vectors_in_memory_where_it_cannot_publish(
    db_path: Path, read_only: bool
) -> None:
    """Read-only and in-memory stores get the in-heap exact index: same results."""
    where = str(db_path) if read_only else ":memory:"
    with mindfile.open(where, embedder=f"hash:{DIMS}", vector_index="exact") as mem:
        fill(mem, 30)
        if read_only:
            mem.close()
            mem = mindfile.open(where, vector_index="exact", read_only=True)
        with mem:
            assert isinstance(mem.index, ExactIndex)
            check_all(mem)


@pytest.fixture
def small_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exact bases carry codes from 100 vectors on, and deltas from 200 are merged."""
    monkeypatch.setattr(ExactDiskIndex, "quantize_from", 100)
    monkeypatch.setattr(ExactDiskIndex, "min_delta", 200)
    monkeypatch.setattr(ExactDiskIndex, "delta_fraction", 0.0)


def published_with_codes(mem: mindfile.Mindfile, n: int = 3000) -> AnnIndex:
    """Store ``n`` memories and publish then map an exact base with codes (the
    threshold lowered by the caller)."""
    mem.store_many([(SESSIONS[i % 4], i, f"memory {i} of many") for i in range(n)])
    assert mem.index.size() == n  # publishes the base
    assert mem.index.size() == n  # and maps it
    assert index(mem)._reader is not None
    return index(mem)


def test_exact_base_with_codes_is_searched_like_the_heap_index(
    db_path: Path, small_codes: None
) -> None:
    """A base large enough for the codes (threshold lowered): published with them,
    mapped, searched through the three stages; merges copy kept rows' codes and encode
    new ones; results and scores equal the in-heap index's, filters included."""
    dims = 32
    with mindfile.open(db_path, embedder=f"hash:{dims}", vector_index="exact") as mem:
        base = published_with_codes(mem)._reader
        assert base is not None and base._rows.codes is not None  # type: ignore[attr-defined]
        first = base.manifest
        # A merge: rewrite some, delete some, add some.
        mem.forget("b")
        mem.store_many([("e", i, f"later memory {i}") for i in range(400)])
        assert mem.index.size() == 3000 - 750 + 400
        assert mem.index.size() == 2650
        merged = index(mem)._reader
        assert merged is not None and merged.manifest.generation != first.generation
        assert merged._rows.codes is not None  # type: ignore[attr-defined]
        heap = ExactIndex(mem.db, dims, quantize_from=100, background=False)
        try:
            for seed in range(20):
                query = unit(seed, dims)
                for where in (None, VectorFilter(session_ids=["c", "e"])):
                    got = mem.index.search(query, 10, where=where)
                    assert got == heap.search(query, 10, where=where)
                    sessions = None if where is None else ["c", "e"]
                    full = oracle(mem, query, 10**9, sessions=sessions)
                    assert_same_ranking(got, full, 10)
        finally:
            heap.close()


def test_a_read_only_rowids_filter_is_located_once_per_generation(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, small_codes: None
) -> None:
    """The mapped exact generation keeps the mask of the last read-only rowids array
    (the preference leg's statements, the same array at every question): the same
    answers as the oracle, the second time without locating the rowids again; a
    writeable array (which could change) is never kept."""
    dims = 32
    with mindfile.open(db_path, embedder=f"hash:{dims}", vector_index="exact") as mem:
        reader = published_with_codes(mem)._reader
        assert reader is not None
        expected_path = "int8 scan (simsimd)" if _simd.ENABLED else "numpy stages"
        assert mem.index.stats()["search"] == expected_path
        ids = np.array([r for (r,) in mem.db.query("SELECT id FROM chunks ORDER BY id")])
        frozen = np.ascontiguousarray(ids[::3])
        frozen.flags.writeable = False
        located: list[int] = []
        real = reader._positions  # type: ignore[attr-defined]

        def spy(rowids: object) -> object:
            located.append(1)
            return real(rowids)

        monkeypatch.setattr(reader, "_positions", spy)
        allowed = set(frozen.tolist())
        for seed in range(4):
            got = mem.index.search(unit(seed, dims), 10, where=VectorFilter(rowids=frozen))
            assert got and {r for r, _ in got} <= allowed
            full = [h for h in oracle(mem, unit(seed, dims), 10**9) if h[0] in allowed]
            assert_same_ranking(got, full, 10)
        assert len(located) == 1
        assert reader._allowed_for[0] is frozen  # type: ignore[attr-defined]
        writeable = ids[1::3].copy()
        mem.index.search(unit(9, dims), 10, where=VectorFilter(rowids=writeable))
        mem.index.search(unit(9, dims), 10, where=VectorFilter(rowids=writeable))
        assert len(located) == 3
        assert reader._allowed_for[0] is frozen  # type: ignore[attr-defined]


def test_exact_base_published_before_reach_is_searched_alike_then_upgraded(
    db_path: Path, small_codes: None
) -> None:
    """A generation whose codes lack ``reach.npy`` (published before the int8 scan) is
    still used: the reach is computed when mapped, results equal the oracle's, and the
    next merge writes a generation with it."""
    dims = 32
    with mindfile.open(db_path, embedder=f"hash:{dims}", vector_index="exact") as mem:
        base = published_with_codes(mem)._reader
        assert base is not None
        generation = index(mem).folder / base.manifest.generation
        expected = [mem.index.search(unit(seed, dims), 10) for seed in range(10)]
    (generation / "reach.npy").unlink()
    with mindfile.open(db_path, embedder=f"hash:{dims}", vector_index="exact") as mem:
        assert mem.index.size() == 3000
        reader = index(mem)._reader
        assert reader is not None and reader.manifest.generation == generation.name
        assert reader._rows.codes is not None  # type: ignore[attr-defined]
        for seed in range(10):
            got = mem.index.search(unit(seed, dims), 10)
            assert got == expected[seed]
            assert_same_ranking(got, oracle(mem, unit(seed, dims), 10**9), 10)
        mem.store_many([("e", i, f"later memory {i}") for i in range(400)])
        assert mem.index.size() == 3400
        assert mem.index.size() == 3400
        merged = index(mem)._reader
        assert merged is not None and merged.manifest.generation != generation.name
        assert (index(mem).folder / merged.manifest.generation / "reach.npy").exists()
        for seed in range(10):
            got = mem.index.search(unit(seed, dims), 10)
            assert_same_ranking(got, oracle(mem, unit(seed, dims), 10**9), 10)


def test_the_ann_path_at_a_size_that_trains_an_index(ann: str, db_path: Path) -> None:
    """5,000 vectors: zvec's HNSW graph and LanceDB's IVF-PQ index (trained from 4,096
    rows) really answer here, not an exact fallback. ANN may miss a true neighbour, so
    the ranking is checked with a tolerance (mean recall@10 at least 0.9 against the
    oracle); every returned score must still be the exact cosine, and filters exact."""
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        mem.store_many([(SESSIONS[i % 4], i, f"memory {i} of many") for i in range(5000)])
        assert mem.index.size() == 5000  # catches up: builds and publishes the base
        assert mem.index.size() == 5000  # switches to it
        base = index(mem)._reader
        assert base is not None and base.manifest.count == 5000
        assert len(index(mem)._delta) == 0
        if ann == "lancedb":
            assert base._indexed  # type: ignore[attr-defined]
        recalls = []
        for seed in range(30):
            query = unit(seed)
            full = dict(oracle(mem, query, 10**9))
            got = mem.index.search(query, 10)
            assert len(got) == 10
            for rowid, score in got:
                assert score == pytest.approx(full[rowid], abs=1e-5)
            best = sorted(full.values(), reverse=True)[:10]
            recalls.append(sum(s >= best[-1] - 1e-6 for _, s in got) / 10)
            filtered = mem.index.search(query, 10, where=VectorFilter(session_ids=["c"]))
            expected = dict(oracle(mem, query, 10**9, sessions=["c"]))
            assert len(filtered) == 10 and all(i in expected for i, _ in filtered)
        assert float(np.mean(recalls)) >= 0.9, recalls


@pytest.mark.parametrize("min_delta", [10**9, 3])
def test_oracle_histories_with_a_delta_that_is_not_always_merged(
    ann: str, min_delta: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The conformance state machine with merges never (everything exact, in the delta)
    or only now and then (searches over a base plus a delta with tombstones)."""
    from hypothesis import settings
    from hypothesis.stateful import run_state_machine_as_test

    from .test_vector_index import IndexMachine

    for cls in (ZvecIndex, LanceIndex, ExactDiskIndex):
        monkeypatch.setattr(cls, "min_delta", min_delta)
    monkeypatch.setattr(ann_module, "CATCH_UP_PAGE", 3)  # catch-ups of several pages
    attrs = {"index_name": ann, "in_file": ann == "exact"}
    machine = type(f"Machine_{ann}_{min_delta}", (IndexMachine,), attrs)
    run_state_machine_as_test(
        machine, settings=settings(max_examples=15, stateful_step_count=20, deadline=None)
    )


def test_filters_longer_than_the_index_takes_in_one_query(ann: str, db_path: Path) -> None:
    """zvec's filter takes at most 20,000 values in an IN list: a preference question
    at 1M chunks allowed ~300k statements and raised zvec's ValueError from search.
    Long lists of allowed rowids, sessions or excluded rowids still filter exactly."""
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=ann) as mem:
        fill(mem, 60)
        rows = [int(r[0]) for r in mem.db.query("SELECT chunk_rowid FROM chunks_vec")]
        allowed = sorted(rows[::2])
        # real rowids among 30,000 that do not exist (any filter may name gone chunks)
        long_rowids = sorted(set(allowed) | set(range(10**6, 10**6 + 30_000)))
        where = VectorFilter(rowids=np.asarray(long_rowids, dtype=np.int64))
        for seed in range(3):
            query = unit(seed)
            got = mem.index.search(query, 10, where=where)
            want = [h for h in oracle(mem, query, 10**9) if h[0] in set(allowed)]
            assert_same_ranking(got, want, 10)
        # the same filter out of order and with repeats: sorted once by the index
        shuffled = np.random.default_rng(0).permutation(long_rowids + long_rowids[:50])
        got = mem.index.search(unit(1), 10, where=VectorFilter(rowids=shuffled))
        want = [h for h in oracle(mem, unit(1), 10**9) if h[0] in set(allowed)]
        assert_same_ranking(got, want, 10)
        # a fraction of the store allowed, as large as the index's list limit
        many = VectorFilter(rowids=np.asarray(rows, dtype=np.int64))
        got = mem.index.search(unit(9), 10, where=many)
        assert_same_ranking(got, oracle(mem, unit(9), 10**9), 10)
        sessions = ["b", "c", *(f"other-{i}" for i in range(25_000))]
        check(mem, unit(11), 5, sessions=sessions)


def test_every_way_around_zvecs_list_limit_filters_exactly(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the limit at 7 values: allowed rowids split into queries, or (from
    ``WIDE_SHARE`` of the base) filtered after one wider query; sessions split; a long
    exclusion applied afterwards."""
    from mindfile.vector import zvec_index

    monkeypatch.setattr(zvec_index, "IN_MAX", 7)
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index="zvec") as mem:
        fill(mem, 200)
        rows = sorted(int(r[0]) for r in mem.db.query("SELECT chunk_rowid FROM chunks_vec"))
        assert len(rows[::25]) / len(rows) < zvec_index.WIDE_SHARE <= len(rows[::6]) / len(rows)
        for allowed in (rows[::25], rows[::6], rows[:-1]):  # 8 of 200 (split); 34; 199
            where = VectorFilter(rowids=np.asarray(allowed, dtype=np.int64))
            for seed in range(3):
                got = mem.index.search(unit(seed), 5, where=where)
                want = [h for h in oracle(mem, unit(seed), 10**9) if h[0] in set(allowed)]
                assert_same_ranking(got, want, 5)
        check(mem, unit(4), 5, sessions=["b", "c", *(f"x{i}" for i in range(20))])
        reader = index(mem)._reader
        assert reader is not None
        gone = rows[:20]
        found = reader.candidates(unit(5), 10, session_keys=None, rowids=None, exclude=gone)
        assert found and not set(found) & set(gone) and len(found) <= 10
        best = [h[0] for h in oracle(mem, unit(5), 10**9) if h[0] not in set(gone)][:10]
        assert set(found) == set(best)  # zvec's search is exact at this size
