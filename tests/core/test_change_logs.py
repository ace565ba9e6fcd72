"""The trigger-kept change logs: reading since a point, pruning, and readers that fell behind."""

from __future__ import annotations

from pathlib import Path

import mindfile
from mindfile.storage import changes


def test_read_since_and_prune(mem: mindfile.Mindfile) -> None:
    for i in range(1, 6):
        mem.store("s", i, f"turn {i} about rivers")  # each turn updates the previous one's context
    newest, rows = changes.read_since(mem.db, "chunks_changes", 0, "chunk_rowid, op")
    assert rows is not None and len(rows) == newest == 4
    assert changes.read_since(mem.db, "chunks_changes", None) == (newest, [])
    with mem.db.atomic():
        changes.prune(mem.db, keep=1)
    assert changes.read_since(mem.db, "chunks_changes", newest - 1)[1] is not None
    assert changes.read_since(mem.db, "chunks_changes", 0)[1] is None  # pruned past: rebuild


def test_a_reader_behind_the_pruned_horizon_rebuilds(db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash") as reader, mindfile.open(db_path) as writer:
        reader.store("s", 1, "lakes and rivers")
        assert reader.lexical is not None and len(reader.lexical.search("rivers", 10)) == 1
        writer.forget("s")
        writer.store("t", 1, "rivers again")
        with writer.db.atomic():
            changes.prune(writer.db, keep=0)
        hits = reader.lexical.search("rivers", 10)
        assert [
            reader.db.scalar("SELECT chunk_text FROM chunks WHERE id = ?", (r,)) for r, _ in hits
        ] == ["rivers again"]
        assert [h.text for h in reader.search("rivers", top_k=5)] == ["rivers again"]


def test_indexes_never_keep_rolled_back_rows(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "committed turn about lakes")
    assert len(mem.search("lakes", top_k=5)) == 1  # indexes loaded
    try:
        with mem.db.atomic():
            mem.store("s", 2, "rolled back turn about volcanoes")
            mem.search("volcanoes", top_k=5)  # must not load uncommitted rows
            raise RuntimeError("abort")
    except RuntimeError:
        pass
    mem.store("s", 2, "replacement turn about glaciers")  # reuses the rolled-back ids
    # The ids were reused: a stale index would still hold the rolled-back vector/terms.
    rolled_back = mem.embedder.embed_query("rolled back turn about volcanoes")
    best = mem.index.search(rolled_back, 1)[0][1]
    assert best < 0.99
    assert mem.lexical is not None and mem.lexical.search("volcanoes", 5) == []
    for mode in ("vector", "fts", "hybrid"):
        texts = [h.text for h in mem.search("volcanoes glaciers", top_k=5, mode=mode)]  # type: ignore[arg-type]
        assert "rolled back turn about volcanoes" not in texts
    assert mem.index.size() == 2
    assert mem.lexical is not None and mem.lexical.size() == 2
    # (the lakes turn also matches, through its neighbour-context column)
    assert mem.search("glaciers", mode="fts")[0].text == "replacement turn about glaciers"
