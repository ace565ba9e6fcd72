"""The trigger-kept change logs: reading since a point, pruning, and readers that fell behind."""

from __future__ import annotations

from pathlib import Path

import engram
from engram.storage import changes


def test_read_since_and_prune(mem: engram.Engram) -> None:
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
    with engram.open(db_path, embedder="hash") as reader, engram.open(db_path) as writer:
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
