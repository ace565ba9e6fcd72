"""Notes: the seed's store/delete pipeline, metadata, tags, atomic updates, search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from backends import raw

import mindfile
from mindfile.errors import (
    ConflictError,
    EmbeddingError,
    InvalidInputError,
    LimitExceededError,
    NotFoundError,
)
from mindfile.memory import notes_session

from ._support import FlakyEmbedder, assert_index_consistent, fts_match, snapshot


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


NS = "memory:alice"


def chunk_meta(mem: mindfile.Mindfile, note_id: str) -> list[dict[str, object]]:
    rows = raw(mem).query(
        "SELECT metadata_json FROM chunks WHERE json_extract(metadata_json, '$.note_id') = ?",
        (note_id,),
    )
    return [json.loads(r[0]) for r in rows]


def test_notes_session_is_the_per_user_namespace() -> None:
    assert notes_session("alice") == "memory:alice"
    with pytest.raises(InvalidInputError):
        notes_session("")


def test_store_writes_an_event_and_chunks_with_the_seed_metadata(mem: mindfile.Mindfile) -> None:
    note = mem.store_note(NS, "note-1", "Alice's dog is called Biscuit.", source="memory_save")
    assert note.note_id == "note-1" and note.session_id == NS
    assert note.created_at == note.updated_at
    [event] = mem.recall(NS)
    assert event.sequence == note.sequence
    assert event.payload["kind"] == "note"
    assert event.payload["content"] == "Alice's dog is called Biscuit."
    [meta] = chunk_meta(mem, "note-1")
    assert meta == {
        "kind": "note",
        "note_id": "note-1",
        "source": "memory_save",
        "tags": [],
        "created_at": note.created_at,
        "updated_at": note.updated_at,
        "schema_version": 1,
    }
    assert [s.session_id for s in mem.list_sessions()] == [NS]
    assert_index_consistent(mem)


def test_long_notes_are_chunked_and_every_chunk_carries_the_metadata(
    mem: mindfile.Mindfile,
) -> None:
    content = " ".join(f"Sentence number {i} about the garden project." for i in range(60))
    mem.store_note(NS, "long", content, tags=["garden"])
    metas = chunk_meta(mem, "long")
    assert len(metas) > 1
    assert all(m["note_id"] == "long" and m["tags"] == ["garden"] for m in metas)
    assert_index_consistent(mem)


def test_timestamps_belong_to_the_backend(mem: mindfile.Mindfile) -> None:
    with pytest.raises(TypeError):
        mem.store_note(NS, "n", "text", created_at="1999-01-01")  # type: ignore[call-arg]


def test_sequences_are_monotonic_even_after_deletes(mem: mindfile.Mindfile) -> None:
    a = mem.store_note(NS, "a", "first")
    b = mem.store_note(NS, "b", "second")
    assert b.sequence > a.sequence
    assert mem.delete_note(NS, "b")
    c = mem.store_note(NS, "c", "third")
    assert c.sequence > b.sequence


def test_tags_are_trimmed_lowercased_and_deduplicated(mem: mindfile.Mindfile) -> None:
    note = mem.store_note(NS, "n", "text", tags=["  Work ", "work", "URGENT", "Multi   Word"])
    assert note.tags == ("work", "urgent", "multi word")
    assert chunk_meta(mem, "n")[0]["tags"] == ["work", "urgent", "multi word"]
    assert mem.get_note(NS, "n").tags == note.tags  # type: ignore[union-attr]


def test_tag_limits_are_inclusive(mem: mindfile.Mindfile) -> None:
    tags = [f"t{i}" for i in range(16)] + ["T0", " t1 "]  # 18 given, 16 after de-duplication
    assert len(mem.store_note(NS, "n", "text", tags=tags).tags) == 16
    assert mem.store_note(NS, "m", "text", tags=["x" * 64]).tags == ("x" * 64,)


@pytest.mark.parametrize(
    "tags",
    [[f"t{i}" for i in range(17)], ["x" * 65]],
    ids=["17-tags", "65-char-tag"],
)
def test_over_limit_tags_are_an_error_and_nothing_is_written(
    mem: mindfile.Mindfile, tags: list[str]
) -> None:
    mem.store_note(NS, "keep", "existing note", tags=["a"])
    before = snapshot(mem)
    with pytest.raises(LimitExceededError):
        mem.store_note(NS, "new", "text", tags=tags)
    with pytest.raises(LimitExceededError):
        mem.store_note(NS, "keep", "replacement", tags=tags)
    with pytest.raises(LimitExceededError):
        mem.update_note(NS, "keep", tags=tags)
    assert snapshot(mem) == before


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("", InvalidInputError),
        ("   \n ", InvalidInputError),
        (42, InvalidInputError),
        ("x" * 100_001, LimitExceededError),
        ("bad \ud800 surrogate", InvalidInputError),
    ],
)
def test_bad_content_is_rejected(mem: mindfile.Mindfile, content: object, error: type) -> None:
    with pytest.raises(error):
        mem.store_note(NS, "n", content)  # type: ignore[arg-type]
    assert mem.list_sessions() == []


def test_bad_ids_and_source_are_rejected(mem: mindfile.Mindfile) -> None:
    for bad in ("", "   ", None, "x" * 513):
        with pytest.raises(InvalidInputError):
            mem.store_note(NS, bad, "text")  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError):
            mem.store_note(bad, "n", "text")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        mem.store_note(NS, "n", "text", source="")
    with pytest.raises(LimitExceededError):
        mem.store_note(NS, "n", "text", source="s" * 129)


def test_update_replaces_content_and_keeps_identity(mem: mindfile.Mindfile) -> None:
    old = mem.store_note(NS, "n", "Alice lives in Lisbon.", source="memory_save", tags=["home"])
    new = mem.update_note(NS, "n", content="Alice moved to Porto.")
    assert new.note_id == "n" and new.created_at == old.created_at
    assert new.updated_at > old.updated_at and new.sequence > old.sequence
    assert new.tags == ("home",) and new.source == "memory_save"  # kept
    assert [n.content for n in mem.list_notes(NS)] == ["Alice moved to Porto."]
    assert fts_match(mem, "lisbon") == [] and fts_match(mem, "porto") == ["Alice moved to Porto."]
    assert all("Lisbon" not in h.text for h in mem.search_notes(NS, "Lisbon"))
    assert len(mem.recall(NS)) == 1
    [meta] = chunk_meta(mem, "n")
    assert meta["created_at"] == old.created_at and meta["updated_at"] == new.updated_at
    assert_index_consistent(mem)


def test_update_of_tags_only_keeps_the_content(mem: mindfile.Mindfile) -> None:
    mem.store_note(NS, "n", "Alice likes tea.", tags=["a", "b"])
    note = mem.update_note(NS, "n", tags=["C"])
    assert note.content == "Alice likes tea." and note.tags == ("c",)
    assert mem.list_notes(NS, tags=["a"]) == []
    assert [n.note_id for n in mem.list_notes(NS, tags=["c"])] == ["n"]


def test_store_note_on_an_existing_id_replaces_it_keeping_created_at(
    mem: mindfile.Mindfile,
) -> None:
    old = mem.store_note(NS, "n", "first version", tags=["x"])
    new = mem.store_note(NS, "n", "second version")
    assert new.created_at == old.created_at and new.tags == ()
    assert [n.content for n in mem.list_notes(NS)] == ["second version"]
    assert raw(mem).scalar("SELECT count(*) FROM notes") == 1


def test_update_errors(mem: mindfile.Mindfile) -> None:
    with pytest.raises(NotFoundError):
        mem.update_note(NS, "missing", content="x")
    mem.store_note(NS, "n", "text")
    with pytest.raises(InvalidInputError):
        mem.update_note(NS, "n")


def test_update_is_atomic_when_embedding_fails(db_path: Path) -> None:
    embedder = FlakyEmbedder()
    with mindfile.open(db_path, embedder=embedder) as mem:
        old = mem.store_note(NS, "n", "Alice's passport expires in March.", tags=["docs"])
        other = mem.store_note(NS, "other", "Unrelated note about bikes.")
        before = snapshot(mem)
        embedder.fail = True
        with pytest.raises(EmbeddingError):
            mem.update_note(NS, "n", content="Alice renewed her passport.")
        with pytest.raises(EmbeddingError):
            mem.store_note(NS, "n", "Alice renewed her passport.")
        assert snapshot(mem) == before
        embedder.fail = False
        assert mem.get_note(NS, "n") == old
        assert mem.get_note(NS, "other") == other
        assert fts_match(mem, "passport") == ["Alice's passport expires in March."]
        hits = mem.search_notes(NS, "passport expires", tags=["docs"])
        assert [h.note_id for h in hits] == ["n"]
        assert_index_consistent(mem)


def test_update_is_atomic_when_the_write_fails_after_the_delete(
    mem: mindfile.Mindfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = mem.store_note(NS, "n", "Alice's passport expires in March.")
    before = snapshot(mem)

    def broken_write(*args: object, **kwargs: object) -> int:
        # By now the old chunks and event were deleted inside the transaction.
        assert raw(mem).scalar("SELECT count(*) FROM chunks") == 0
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(mem.stores.sessions, "write_event", broken_write)
    with pytest.raises(RuntimeError):
        mem.update_note(NS, "n", content="new text")
    assert snapshot(mem) == before
    assert mem.get_note(NS, "n") == old
    assert_index_consistent(mem)


def test_update_detects_a_concurrent_change(db_path: Path) -> None:
    embedder = FlakyEmbedder()
    # No cache: the unchanged text must really be embedded again for the hook to run.
    with (
        mindfile.open(db_path, embedder=embedder, embedding_cache=False) as mem,
        mindfile.open(db_path) as other,
    ):
        mem.store_note(NS, "n", "version one")
        # While this update embeds (outside its transaction), another connection
        # replaces the note; the update must not silently overwrite that change.
        embedder.before = lambda texts: other.store_note(NS, "n", "version two", tags=["x"])
        with pytest.raises(ConflictError):
            mem.update_note(NS, "n", tags=["y"])
        note = mem.get_note(NS, "n")
        assert note is not None and note.content == "version two" and note.tags == ("x",)


def test_delete_removes_chunks_vectors_fts_rows_and_the_event(mem: mindfile.Mindfile) -> None:
    content = " ".join(f"Line {i}: the zebra crossing near the office." for i in range(40))
    mem.store_note(NS, "n", content)
    mem.store_note(NS, "keep", "A note that stays.")
    assert raw(mem).scalar("SELECT count(*) FROM chunks") > 2
    assert mem.delete_note(NS, "n") is True
    assert mem.get_note(NS, "n") is None
    assert raw(mem).scalar("SELECT count(*) FROM chunks") == 1
    assert raw(mem).scalar("SELECT count(*) FROM chunks_vec") == 1
    assert fts_match(mem, "zebra") == []
    assert [e.payload["note_id"] for e in mem.recall(NS)] == ["keep"]
    assert raw(mem).query("SELECT note_id FROM notes") == [("keep",)]
    assert all(h.note_id == "keep" for h in mem.search_notes(NS, "zebra crossing"))
    assert mem.delete_note(NS, "n") is False
    assert_index_consistent(mem)


def test_identical_notes_never_share_chunks(mem: mindfile.Mindfile) -> None:
    mem.store_note(NS, "a", "Buy oat milk.")
    mem.store_note(NS, "b", "Buy oat milk.")
    assert raw(mem).scalar("SELECT count(*) FROM chunks") == 2
    assert mem.delete_note(NS, "a")
    assert fts_match(mem, "oat") == ["Buy oat milk."]
    assert [h.note_id for h in mem.search_notes(NS, "oat milk")] == ["b"]
    assert_index_consistent(mem)


def test_get_and_list_notes(mem: mindfile.Mindfile) -> None:
    assert mem.get_note(NS, "nope") is None
    for i in range(5):
        mem.store_note(NS, f"n{i}", f"note {i}", tags=["even"] if i % 2 == 0 else ["odd"])
    assert [n.note_id for n in mem.list_notes(NS)] == ["n4", "n3", "n2", "n1", "n0"]
    assert [n.note_id for n in mem.list_notes(NS, limit=2, offset=1)] == ["n3", "n2"]
    assert [n.note_id for n in mem.list_notes(NS, tags=[" EVEN "])] == ["n4", "n2", "n0"]
    assert mem.list_notes(NS, tags=["even", "odd"]) == []
    assert mem.list_notes("memory:bob") == []
    for bad in ({"limit": 0}, {"limit": 1001}, {"offset": -1}, {"limit": True}):
        with pytest.raises(InvalidInputError):
            mem.list_notes(NS, **bad)  # type: ignore[arg-type]


def test_conversation_events_in_the_namespace_are_not_notes(mem: mindfile.Mindfile) -> None:
    mem.store(NS, 1, {"role": "user", "content": "a plain message about kites"})
    note = mem.store_note(NS, "n", "a note about kites")
    assert note.sequence == 2
    assert [n.note_id for n in mem.list_notes(NS)] == ["n"]
    assert [h.note_id for h in mem.search_notes(NS, "kites")] == ["n"]
    assert mem.delete_note(NS, "n")
    assert [r.sequence for r in mem.recall(NS)] == [1]


def test_search_filters_tags_in_sql(mem: mindfile.Mindfile) -> None:
    mem.store_note(NS, "w", "Quarterly report draft is due Friday.", tags=["work"])
    mem.store_note(NS, "h", "Book the report card meeting at school.", tags=["home"])
    mem.store_note(NS, "both", "Report expenses for the home office.", tags=["work", "home"])
    mem.set_fact("alice", "work", "report", "quarterly report owner")
    assert {h.note_id for h in mem.search_notes(NS, "report", tags=["work"])} == {"w", "both"}
    assert [h.note_id for h in mem.search_notes(NS, "report", tags=["work", "home"])] == ["both"]
    with_facts = mem.search_notes(NS, "report", tags=["work"], facts_scope="alice")
    assert all(h.kind == "note" for h in with_facts)  # facts have no tags
    assert mem.search_notes(NS, "report", tags=["nope"]) == []


def test_search_returns_one_compact_hit_per_note(mem: mindfile.Mindfile) -> None:
    content = " ".join(f"Part {i}: notes on sourdough starter feeding." for i in range(40))
    mem.store_note(NS, "bread", content, tags=["baking"])
    mem.store_note(NS, "other", "Sourdough is a bread.")
    hits = mem.search_notes(NS, "sourdough starter", top_k=5)
    assert sorted(h.note_id for h in hits) == ["bread", "other"]  # type: ignore[type-var]
    d = hits[0].to_dict()
    assert set(d) == {"kind", "note_id", "tags", "text", "score"}
    with pytest.raises(InvalidInputError):
        mem.search_notes(NS, "x", top_k=0)


def test_users_are_isolated(mem: mindfile.Mindfile) -> None:
    mem.store_note(notes_session("alice"), "n", "Alice's secret recipe uses saffron.")
    mem.store_note(notes_session("bob"), "n", "Bob's bike is blue.")
    assert all("Bob" in h.text for h in mem.search_notes(notes_session("bob"), "saffron"))
    assert mem.list_notes(notes_session("bob"))[0].content == "Bob's bike is blue."
    assert mem.delete_note(notes_session("bob"), "n")
    assert mem.get_note(notes_session("alice"), "n") is not None


def test_forgetting_the_namespace_removes_its_notes(mem: mindfile.Mindfile) -> None:
    mem.store_note(NS, "n", "text")
    assert mem.forget(NS)
    assert raw(mem).scalar("SELECT count(*) FROM notes") == 0
    assert mem.get_note(NS, "n") is None


def test_notes_persist_across_reopen(db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash") as mem:
        note = mem.store_note(NS, "n", "Persistent note about violins.", tags=["music"])
    with mindfile.open(db_path) as mem:
        assert mem.get_note(NS, "n") == note
        assert [h.note_id for h in mem.search_notes(NS, "violins", tags=["music"])] == ["n"]


@pytest.mark.sqlite_only("EXPLAIN QUERY PLAN is SQLite's")
def test_the_note_lookup_uses_the_index(mem: mindfile.Mindfile) -> None:
    plan = raw(mem).query(
        "EXPLAIN QUERY PLAN DELETE FROM chunks WHERE session_id = ? "
        "AND json_extract(metadata_json, '$.note_id') = ? "
        "AND json_extract(metadata_json, '$.kind') = 'note'",
        (NS, "n"),
    )
    assert any("idx_chunks_note" in str(row) for row in plan)


def test_semantic_search_over_notes_with_the_default_model(mem_static: mindfile.Mindfile) -> None:
    mem = mem_static
    mem.store_note(NS, "dog", "The user's dog is named Biscuit and loves the beach.")
    mem.store_note(NS, "deadline", "Project deadline for the quarterly report is Friday.")
    mem.store_note(NS, "coffee", "User prefers dark roast coffee, no sugar.")
    mem.store_note(NS, "wifi", "The office wifi password rotates every month.")
    # No query word appears in the matching note: only meaning can find it.
    assert mem.search_notes(NS, "puppy")[0].note_id == "dog"
    assert mem.search_notes(NS, "favourite hot drink")[0].note_id == "coffee"
