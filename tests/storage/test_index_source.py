"""The index source store: what the derived indexes read (storage/index_source.py).

Rows are written through the public API (no SQL); the store's answers are checked
against each other and against what was written: ids in order, pages, the change logs
and the store id.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import mindfile
from mindfile.storage import changes
from mindfile.storage.index_source import SqliteIndexSourceStore, index_source


def _filled(mem: mindfile.Mindfile) -> SqliteIndexSourceStore:
    mem.store_many([("a", i, f"alpha turn {i} about rivers") for i in range(1, 6)])
    mem.store_many([("b", i, f"beta turn {i} about lakes") for i in range(1, 4)])
    source = index_source(mem.db)
    assert isinstance(source, SqliteIndexSourceStore)
    return source


def test_chunk_reads_page_in_id_order(mem: mindfile.Mindfile) -> None:
    source = _filled(mem)
    every = source.chunks_after(0, 1_000)
    ids = [row[0] for row in every]
    assert len(ids) == 8 and ids == sorted(ids)
    assert source.chunk_max_id() == source.chunk_id_high() == ids[-1]
    first, rest = source.chunks_after(0, 3), source.chunks_after(ids[2], 1_000)
    assert first + rest == every
    _rowid, session, text, before, after = every[0]
    assert (session, text) == ("a", "alpha turn 1 about rivers")
    assert before == "" and after == "alpha turn 2 about rivers"  # its neighbour's text
    picked = source.chunks_by_ids([ids[5], ids[1], 10**9])
    assert sorted(picked) == [every[1], every[5]]
    assert source.chunks_by_ids([]) == []


def test_deleting_the_newest_chunks_keeps_the_high_water_mark(mem: mindfile.Mindfile) -> None:
    source = _filled(mem)
    high = source.chunk_max_id()
    seen, _ = source.text_changes_since(None)
    mem.forget("b")
    assert source.chunk_max_id() < high == source.chunk_id_high()
    newest, logged = source.text_changes_since(seen)
    assert logged is not None and newest > seen
    assert {op for _, op in logged} == {"d"} and len(logged) == 3
    assert source.text_change_bounds() == changes.bounds(mem.db, "chunks_changes")
    assert source.text_changes_since(None) == (newest, [])
    with mem.db.atomic():
        changes.prune(mem.db, keep=0)
    assert source.text_changes_since(seen)[1] is None  # pruned past: rebuild


def test_vector_reads_agree(mem: mindfile.Mindfile) -> None:
    source = _filled(mem)
    dims = mem.embedder.dimensions
    every = source.vectors_after(0, dims)
    assert every.created is None and every.matrix.shape == (8, dims)
    assert every.matrix.dtype == np.float32 and every.matrix.flags.writeable
    assert source.vector_max_id() == int(every.ids[-1]) == source.chunk_max_id()
    full = source.all_vectors(dims)
    assert full is not None
    assert np.array_equal(full.ids, every.ids) and np.array_equal(full.matrix, every.matrix)
    assert full.sessions == every.sessions == ["a"] * 5 + ["b"] * 3
    page = source.vectors_after(int(every.ids[1]), dims, 2, created=True)
    assert page.ids.tolist() == every.ids[2:4].tolist()
    assert page.created is not None and len(page.created) == 2
    assert all(t.startswith("20") for t in page.created)
    wanted = [int(every.ids[6]), int(every.ids[0]), 10**9]
    picked = source.vectors_by_ids(wanted, dims)
    assert picked.ids.tolist() == sorted(wanted[:2])
    assert np.array_equal(picked.matrix, every.matrix[[0, 6]])
    assert len(source.vectors_by_ids([], dims, created=True).ids) == 0


def test_vector_changes_name_each_id_once(mem: mindfile.Mindfile) -> None:
    source = _filled(mem)
    seen, none = source.vector_changes_since(None)
    assert none == [] and seen == changes.bounds(mem.db, "chunks_vec_changes")[1]
    ids = [int(i) for i in source.vectors_after(0, mem.embedder.dimensions).ids]
    mem.forget("a")
    newest, changed = source.vector_changes_since(seen)
    assert changed == ids[:5] and newest > seen


def test_an_empty_store_has_no_vectors(db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash") as mem:
        source = index_source(mem.db)
        assert source.all_vectors(mem.embedder.dimensions) is None
        assert source.vector_max_id() == source.chunk_max_id() == source.chunk_id_high() == 0


def test_store_id_is_made_once_and_the_model_is_the_bound_one(db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash") as mem:
        source = index_source(mem.db)
        made = source.store_id()
        assert made is not None and len(made) == 32
        assert source.store_id(create=False) == source.store_id() == made
        assert source.embedding_model() == mem.embedder.model_id
    with mindfile.open(db_path, embedder="hash") as again:
        assert index_source(again.db).store_id(create=False) == made
