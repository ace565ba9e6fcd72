"""Stored text that is not valid UTF-8 (issue 8 part 3): reads decode it with
replacement, and reconcile reports (and repairs) the damaged cells."""

from __future__ import annotations

from pathlib import Path

import mindfile
from mindfile.storage.damaged import find_damaged

# "hello \xffLisbon" and a payload whose content has a stray 0xff byte.
BAD_CHUNK = "CAST(x'68656c6c6f20ff4c6973626f6e' AS TEXT)"
BAD_PAYLOAD = "CAST(x'7b22726f6c65223a2275736572222c22636f6e74656e74223a2268ff227d' AS TEXT)"


def _damaged_store(path: Path) -> None:
    with mindfile.open(path, embedder="hash") as mem:
        mem.store("s", 1, {"role": "user", "content": "hello Lisbon"})
        mem.store("s", 2, {"role": "user", "content": "my sister paints"})
        mem.db.execute(f"UPDATE chunks SET chunk_text = {BAD_CHUNK} WHERE id = 1")
        mem.db.execute(
            f"UPDATE conversation_events SET payload_json = {BAD_PAYLOAD} WHERE sequence = 1"
        )


def test_reconcile_reports_and_repairs_damaged_text(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    _damaged_store(path)
    with mindfile.open(path) as mem:
        report = mem.reconcile(repair=True)
        assert sorted(report.damaged_text) == [
            "chunks.chunk_text#1",
            "conversation_events.payload_json#1",
        ]
        assert not report.consistent
        assert find_damaged(mem.db) == []
        assert mem.reconcile(repair=False).consistent
        assert mem.recall("s")[0].payload == {"role": "user", "content": "h\ufffd"}


def test_reconcile_without_repair_only_reports(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    _damaged_store(path)
    with mindfile.open(path, lexical_index="fts5") as mem:  # nothing reads on open
        mem.db.repaired_text.clear()
        report = mem.reconcile(repair=False)
        assert report.damaged_text == ["chunks.chunk_text#1", "conversation_events.payload_json#1"]
        assert len(find_damaged(mem.db)) == 2


def test_every_read_works_on_damaged_text(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    _damaged_store(path)
    with mindfile.open(path) as mem:
        hits = mem.search("Lisbon")
        assert hits and hits[0].text == "hello \ufffdLisbon"
        ctx = mem.build_context("s", "Lisbon", token_budget=300)
        assert ctx.messages
        assert len(mem.recall("s")) == 2
        mem.rebuild_index()
        # The reads repaired the cells; the next reconcile reports them, once.
        assert len(mem.reconcile().damaged_text) == 2
        assert mem.reconcile().consistent
