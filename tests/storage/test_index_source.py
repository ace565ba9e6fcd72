"""The index source store: what the derived indexes read (storage/index_source.py), on
SQLite and on Postgres (``seam``: one contract, the same tests).

Rows are written through each backend's write path (no SQL); the store's answers are
checked against each other and against what was written: ids in order, pages, the
change logs (inserts, updates, deletes, pruning) and the store id. Postgres's commit
order under concurrent writers is tested in tests/postgres/test_pg_commit_order.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import mindfile
from mindfile.storage.db import utcnow
from mindfile.storage.index_source import IndexSourceStore, SqliteIndexSourceStore, index_source
from mindfile.storage.postgres.index_source import PgIndexSourceStore

from ._seam import PgSeam, Seam

FAR = "2099-01-01T00:00:00.000000+00:00"


def _filled(seam: Seam) -> IndexSourceStore:
    for i in range(1, 6):
        seam.add_event("a", i, f"alpha turn {i} about rivers")
    for i in range(1, 4):
        seam.add_event("b", i, f"beta turn {i} about lakes")
    return index_source(seam.db)


def test_index_source_is_the_backend_s_own(seam: Seam) -> None:
    expected = PgIndexSourceStore if isinstance(seam, PgSeam) else SqliteIndexSourceStore
    assert type(index_source(seam.db)) is expected


def test_chunk_reads_page_in_id_order(seam: Seam) -> None:
    source = _filled(seam)
    every = source.chunks_after(0, 1_000)
    ids = [row[0] for row in every]
    assert len(ids) == 8 and ids == sorted(ids)
    assert source.chunk_max_id() == source.chunk_id_high() == ids[-1]
    first, rest = source.chunks_after(0, 3), source.chunks_after(ids[2], 1_000)
    assert first + rest == every
    _rowid, session, text, before, after = every[0]
    assert (session, text) == ("a", "alpha turn 1 about rivers")
    assert before == "" and after == "alpha turn 2 about rivers"  # its neighbour's text
    assert every[1][3] == "alpha turn 1 about rivers"
    picked = source.chunks_by_ids([ids[5], ids[1], 10**9])
    assert sorted(picked) == [every[1], every[5]]
    assert source.chunks_by_ids([]) == []
    assert source.chunks_after(ids[-1], 10) == []


def test_deleting_the_newest_chunks_keeps_the_high_water_mark(seam: Seam) -> None:
    source = _filled(seam)
    high = source.chunk_max_id()
    seen, none = source.text_changes_since(None)
    assert none == []
    seam.forget("b")
    assert source.chunk_max_id() < high == source.chunk_id_high()
    newest, logged = source.text_changes_since(seen)
    assert logged is not None and newest > seen
    assert {op for _, op in logged} == {"d"} and len(logged) == 3
    assert source.text_changes_since(None) == (newest, [])
    assert source.text_changes_since(newest) == (newest, [])
    oldest, top = source.text_change_bounds()
    assert top == newest and oldest <= newest


def test_updated_and_deleted_text_shows_in_the_log(seam: Seam) -> None:
    source = _filled(seam)
    ids = {row[2]: row[0] for row in source.chunks_after(0, 100)}
    last_a, first_b = ids["alpha turn 5 about rivers"], ids["beta turn 1 about lakes"]
    seen, _ = source.text_changes_since(None)
    # A new event gives the session's newest chunk its context after: an update.
    seam.add_event("a", 6, "alpha turn 6 about rivers")
    newest, logged = source.text_changes_since(seen)
    assert logged == [(last_a, "u")] and newest > seen
    [(_, _, _, _, after)] = source.chunks_by_ids([last_a])
    assert after == "alpha turn 6 about rivers"
    # Deleting a chunk logs it, and its neighbour loses the deleted text: an update.
    seam.stores.lifecycle.delete_chunks([first_b])
    later, logged = source.text_changes_since(newest)
    assert logged is not None and logged[0] == (first_b, "d")
    assert {op for _, op in logged[1:]} == {"u"} and later > newest
    assert source.chunks_by_ids([first_b]) == []
    # Each call gives the rows after the seq asked for, oldest first.
    _, both = source.text_changes_since(seen)
    assert both == [(last_a, "u"), *logged]


def test_a_pruned_log_asks_for_a_rebuild(seam: Seam) -> None:
    source = _filled(seam)
    seen, _ = source.text_changes_since(None)
    vec_seen, _ = source.vector_changes_since(None)
    seam.forget("a")
    seam.forget("b")
    newest, logged = source.text_changes_since(seen)
    assert logged is not None and len(logged) == 8
    seam.prune_changes(keep=0)
    assert source.text_changes_since(seen) == (newest, None)  # pruned past it: rebuild
    assert source.vector_changes_since(vec_seen)[1] is None
    # An index that had applied everything is not sent to rebuild, and the newest seq
    # survives the pruning (the next change gets a higher one).
    assert source.text_changes_since(newest) == (newest, [])
    assert source.text_change_bounds()[1] == newest
    seam.add_event("c", 1, "gamma turn one")
    seam.add_event("c", 2, "gamma turn two")
    later, logged = source.text_changes_since(newest)
    assert later > newest and logged is not None and [op for _, op in logged] == ["u"]


def test_vector_reads_agree(seam: Seam) -> None:
    source = _filled(seam)
    dims = seam.dimensions
    every = source.vectors_after(0, dims)
    assert every.created is None and every.matrix.shape == (8, dims)
    assert every.matrix.dtype == np.float32 and every.matrix.flags.writeable
    assert source.vector_max_id() == int(every.ids[-1]) == source.chunk_max_id()
    texts = [row[2] for row in source.chunks_after(0, 100)]
    expected = seam.embedder.embed_documents(texts).astype(np.float32)
    assert np.allclose(every.matrix, expected, atol=1e-6)  # the stored vectors, in id order
    full = source.all_vectors(dims)
    assert full is not None
    assert np.array_equal(full.ids, every.ids) and np.array_equal(full.matrix, every.matrix)
    assert full.sessions == every.sessions == ["a"] * 5 + ["b"] * 3
    page = source.vectors_after(int(every.ids[1]), dims, 2, created=True)
    assert page.ids.tolist() == every.ids[2:4].tolist()
    assert page.created is not None and len(page.created) == 2
    assert all(t.startswith("20") for t in page.created)
    wanted = [int(every.ids[6]), int(every.ids[0]), 10**9]
    picked = source.vectors_by_ids(wanted, dims, created=True)
    assert picked.ids.tolist() == sorted(wanted[:2]) and picked.sessions == ["a", "b"]
    assert np.array_equal(picked.matrix, every.matrix[[0, 6]])
    assert picked.created is not None and len(picked.created) == 2
    assert len(source.vectors_by_ids([], dims, created=True).ids) == 0
    # The vectors alone (an ANN index's rescoring): the same rows, no chunk columns.
    ids, matrix = source.vectors_of(wanted, dims)
    assert ids.dtype == np.int64 and ids.tolist() == picked.ids.tolist()
    assert matrix.dtype == np.float32 and np.array_equal(matrix, picked.matrix)
    none_ids, none = source.vectors_of([], dims)
    assert none_ids.size == 0 and none.shape == (0, dims)


def test_vector_changes_name_each_id_once(seam: Seam) -> None:
    source = _filled(seam)
    seen, none = source.vector_changes_since(None)
    assert none == [] and seen >= 8  # every vector's insert was logged
    ids = [int(i) for i in source.vectors_after(0, seam.dimensions).ids]
    seam.forget("a")
    newest, changed = source.vector_changes_since(seen)
    assert changed == ids[:5] and newest > seen
    assert source.vector_changes_since(newest) == (newest, [])


def test_a_vector_written_late_shows_in_the_log_not_by_id(seam: Seam) -> None:
    """A vector dropped and written again (an embedding job) has an id below the highest
    vector's: only the change log names it, on both backends."""
    source = _filled(seam)
    dims = seam.dimensions
    every = source.vectors_after(0, dims)
    target = int(every.ids[2])
    seen, _ = source.vector_changes_since(None)
    jobs = seam.stores.jobs
    with seam.atomic():
        seam.stores.integrity.drop_vectors([target])
    dropped, changed = source.vector_changes_since(seen)
    assert changed == [target] and source.vectors_by_ids([target], dims).ids.size == 0
    assert jobs.enqueue([target], utcnow()) == 1
    leased, _ = jobs.claim(
        "t1", "w1", now=FAR, expires=FAR, limit=10, max_retries=3, gone=lambda _owner: False
    )
    assert [j.chunk_rowid for j in leased] == [target]
    blob = every.matrix[2].astype("<f4").tobytes()
    assert jobs.complete("t1", leased, [blob], seam.model_id, utcnow()) == 1
    newest, changed = source.vector_changes_since(dropped)
    assert changed == [target] and newest > dropped
    assert source.vector_max_id() == int(every.ids[-1]) > target  # not found by id order
    back = source.vectors_by_ids([target], dims)
    assert np.array_equal(back.matrix, every.matrix[[2]])


def test_an_empty_store_has_no_vectors(seam: Seam) -> None:
    source = index_source(seam.db)
    assert source.all_vectors(seam.dimensions) is None
    assert source.vector_max_id() == source.chunk_max_id() == source.chunk_id_high() == 0
    assert source.chunks_after(0, 10) == []
    assert len(source.vectors_after(0, seam.dimensions).ids) == 0
    assert source.text_changes_since(None) == (0, [])
    assert source.vector_changes_since(0) == (0, [])
    assert source.text_change_bounds() == (1, 0)


def test_store_id_is_made_once_and_the_model_is_the_bound_one(seam: Seam) -> None:
    seam.bind_model()
    source = index_source(seam.db)
    made = source.store_id()  # (the SQLite engine made it on open)
    assert made is not None and len(made) == 32
    assert source.store_id(create=False) == source.store_id() == made
    assert index_source(seam.db).store_id(create=False) == made
    assert source.embedding_model() == seam.model_id


def test_store_id_is_made_inside_a_snapshot_too(seam: Seam) -> None:
    """The indexes may ask under ``snapshot()``, which is read-only on Postgres."""
    source = index_source(seam.db)
    with seam.db.snapshot():
        made = source.store_id()
        assert made is not None and source.store_id() == made
    assert source.store_id(create=False) == made


def test_the_store_id_survives_reopening(db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash") as mem:
        made = index_source(mem.db).store_id()
    with mindfile.open(db_path, embedder="hash") as again:
        assert index_source(again.db).store_id(create=False) == made
