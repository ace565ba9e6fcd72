"""No native code on a hot path gives None's references away.

On Python 3.11 None is an ordinary object with a reference count. A C extension that
returns ``Py_None`` without a reference of its own gives one of None's away at each
call, and the process dies ("Fatal Python error: none_dealloc") once it has made as
many calls as None had references: simsimd's ``cdist(..., out=...)`` did, and both
processes of a 5-minute load test died after ~20k searches each (benchmarks/README.md,
"A long mixed load"). Every hot path that reaches native code (the vector indexes, the
embedders, SQLite, the BM25 index) runs many times here; None's count must not fall by
anything near the number of calls (other threads may move it by a few).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import mindfile
from mindfile.vector.exact_disk import ExactDiskIndex

from ._support import none_lost

CALLS = 1500


@pytest.fixture
def int8_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exact bases carry codes (the int8 scan) from 100 vectors on, published at once."""
    monkeypatch.setattr(ExactDiskIndex, "quantize_from", 100)
    monkeypatch.setattr(ExactDiskIndex, "min_delta", 200)
    monkeypatch.setattr(ExactDiskIndex, "delta_fraction", 0.0)


@pytest.mark.parametrize("index", ["exact", "zvec", "lancedb", "sqlite-vec"])
def test_searching_leaves_none_alone(db_path: Path, int8_scan: None, index: str) -> None:
    with mindfile.open(db_path, embedder="hash:32", vector_index=index) as mem:
        mem.store_many(
            [(f"s{i % 7}", i, f"memory {i} of many, about topic {i % 13}") for i in range(3000)]
        )
        assert mem.index.size() == 3000
        assert mem.index.size() == 3000  # published and mapped
        query = mem.embedder.embed_query("memory 17 about topic 4")
        assert len(mem.index.search(query, 10)) == 10
        assert none_lost(lambda: mem.index.search(query, 10), CALLS) < CALLS // 3
        assert none_lost(lambda: mem.search("memory 17 about topic 4", top_k=5), CALLS) < CALLS // 3
        if index == "exact":
            stats = mem.index.stats()
            assert stats["search"] != "float32", stats  # the codes were searched


def test_the_bundled_model_and_sqlite_leave_none_alone(mem_static: mindfile.Mindfile) -> None:
    """Embedding (model2vec, tokenizers), writing and reading SQLite (apsw, FTS5) and
    the BM25 index, through store and search (each message new: none is deduplicated)."""
    seq = iter(range(10**6))

    def store() -> None:
        n = next(seq)
        mem_static.store("s", n, {"role": "user", "content": f"I walked my dog {n} times"})

    assert none_lost(store, 600) < 200
    assert mem_static.db.scalar("SELECT count(*) FROM chunks_vec") == 601
    hits = mem_static.search("where did I walk the dog", top_k=5)
    assert len(hits) == 5
    assert (
        none_lost(lambda: mem_static.search("where did I walk the dog", top_k=5), CALLS)
        < CALLS // 3
    )


def test_the_onnx_embedder_leaves_none_alone() -> None:
    from mindfile.embed import resolve_embedder

    embedder = resolve_embedder("onnx:minilm")
    assert none_lost(lambda: embedder.embed_query("where did I walk the dog"), 600) < 200
