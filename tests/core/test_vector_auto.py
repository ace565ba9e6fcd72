"""vector_index="auto" (the default): exact for small stores, zvec from AUTO_ANN_CHUNKS."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import mindfile
import mindfile.vector


def test_small_stores_use_the_exact_index_and_say_why(tmp_path: Path) -> None:
    with mindfile.open(tmp_path / "m.db", embedder="hash") as mem:
        mem.store("s", 1, "hello there")
        info = mem.info()
        assert info.vector_index == "exact"
        assert info.extra["vector_index_choice"] == "auto: exact below 200,000 chunks"
    with mindfile.open(tmp_path / "m.db", vector_index="exact") as mem:
        assert mem.info().extra["vector_index_choice"] is None


@pytest.mark.skipif(importlib.util.find_spec("zvec") is None, reason="needs mindfile[zvec]")
def test_large_stores_switch_to_zvec_with_the_same_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        mem.store_many([("s", i, f"note {i} about the lake and the hills") for i in range(1, 41)])
        exact = [(h.chunk_id, round(h.score, 5)) for h in mem.search("lake hills", mode="vector")]
    monkeypatch.setattr(mindfile.vector, "AUTO_ANN_CHUNKS", 30)
    with mindfile.open(path) as mem:
        info = mem.info()
        assert info.vector_index == "zvec"
        assert info.extra["vector_index_choice"] == "auto: zvec from 30 chunks"
        got = [(h.chunk_id, round(h.score, 5)) for h in mem.search("lake hills", mode="vector")]
        assert got == exact
    with mindfile.open(path, read_only=True) as mem:  # zvec needs a writable store
        assert mem.info().vector_index == "exact"


def test_info_reports_where_the_vector_index_lives(tmp_path: Path) -> None:
    """info().extra["vector"]: the shared generation and this process's delta (exact on
    a file), the heap (in memory), the store's table (sqlite-vec)."""
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        mem.store_many([("s", i, f"note {i} about the lake") for i in range(1, 31)])
        mem.search("lake")
        before = mem.info().extra["vector"]
        assert before["persisted"] is False and before["delta"] == 30
        assert mem.index.merge(full=True)  # type: ignore[attr-defined]
        mem.search("lake")
        after = mem.info().extra["vector"]
        assert after["persisted"] is True and after["base_count"] == 30
        assert after["search"] == "float32"  # 30 vectors: below the codes' threshold
        assert after["delta"] == 0 and after["folder"].endswith("m.db.index/exact")
    with mindfile.open(":memory:", embedder="hash") as mem:
        mem.store("s", 1, "hello")
        mem.search("hello")
        assert mem.info().extra["vector"] == {
            "persisted": False,
            "vectors": 1,
            "codes": False,
            "search": "float32",  # one vector: no codes
        }
    with mindfile.open(tmp_path / "v.db", embedder="hash", vector_index="sqlite-vec") as mem:
        assert mem.info().extra["vector"]["persisted"] is True
