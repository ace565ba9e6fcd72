"""Stores written before the rename to Mindfile still open, migrate and answer."""

from __future__ import annotations

import shutil
from pathlib import Path

import mindfile
from mindfile.embed import DEFAULT_MODEL_ID
from mindfile.storage.migrations import load_migrations

from ._support import assert_consistent

FIXTURE = Path(__file__).parent.parent / "fixtures" / "store-0.1.0.db"


def copy_fixture(tmp_path: Path) -> Path:
    target = tmp_path / "old.db"
    shutil.copyfile(FIXTURE, target)
    return target


def test_a_0_1_0_store_opens_and_is_migrated(tmp_path: Path) -> None:
    path = copy_fixture(tmp_path)
    with mindfile.open(path) as mem:
        info = mem.info()
        assert info.schema_version == len(load_migrations())
        assert info.embedding_model == DEFAULT_MODEL_ID == "mindfile/minilm-l6-static-256"
        models = {m for (m,) in mem.db.query("SELECT DISTINCT embedding_model FROM chunks_vec")}
        assert models == {DEFAULT_MODEL_ID}
        assert_consistent(mem)
        hits = mem.search("where do I live now?", top_k=2)
        assert hits[0].text == "I moved to Lisbon in May."
        assert [e.sequence for e in mem.recall("chat-1")] == [1, 2, 3]
        fact = mem.get_fact("alice", "home", "city")
        assert fact is not None and fact.value == "Porto"
        assert [n.content for n in mem.list_notes("memory:alice")] == [
            "Alice prefers window seats."
        ]
        assert mem.read_scratchpad("chat-1").items == ("goal: plan the trip",)
    # Reopening the migrated store is a no-op, and new writes index as usual.
    with mindfile.open(path) as mem:
        mem.store("chat-1", 4, {"role": "user", "content": "My dentist is Dr. Okafor."})
        assert mem.search("who is my dentist?", top_k=1)[0].sequence_start == 4
        assert_consistent(mem)


def test_the_rename_migration_does_not_log_every_vector_as_changed(tmp_path: Path) -> None:
    path = copy_fixture(tmp_path)
    with mindfile.open(path) as mem:
        triggers = {
            name for (name,) in mem.db.query("SELECT name FROM sqlite_master WHERE type='trigger'")
        }
        assert "chunks_vec_changes_au" in triggers
        # The trigger is back: an update of a vector is logged again.
        before = int(mem.db.scalar("SELECT count(*) FROM chunks_vec_changes"))
        with mem.db.atomic():
            mem.db.execute("UPDATE chunks_vec SET embedding_model = embedding_model")
        after = int(mem.db.scalar("SELECT count(*) FROM chunks_vec_changes"))
        assert after - before == int(mem.db.scalar("SELECT count(*) FROM chunks_vec"))
