"""Facts: unique keys per scope, history on supersede/delete, hybrid search."""

from __future__ import annotations

from pathlib import Path

import pytest
from backends import raw

import mindfile
from mindfile.errors import ConflictError, EmbeddingError, InvalidInputError, LimitExceededError
from mindfile.memory import facts_session

from ._support import FlakyEmbedder, assert_index_consistent, fts_match, snapshot


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


def test_set_get_and_normalised_names(mem: mindfile.Mindfile) -> None:
    fact = mem.set_fact("alice", "  Food ", "Favorite   Drink", "green tea", source="user")
    assert (fact.category, fact.key, fact.value, fact.source) == (
        "food",
        "favorite drink",
        "green tea",
        "user",
    )
    assert fact.created_at == fact.updated_at
    assert mem.get_fact("alice", "FOOD", "favorite drink") == fact
    assert mem.get_fact("alice", "food", "other") is None
    assert mem.get_fact("bob", "food", "favorite drink") is None  # scopes are separate
    assert raw(mem).scalar("SELECT count(*) FROM facts") == 1


def test_keys_are_unique_per_scope_and_category(mem: mindfile.Mindfile) -> None:
    mem.set_fact("alice", "food", "drink", "tea")
    mem.set_fact("alice", "work", "drink", "coffee")
    mem.set_fact("bob", "food", "drink", "water")
    assert [(f.category, f.value) for f in mem.list_facts("alice")] == [
        ("food", "tea"),
        ("work", "coffee"),
    ]
    assert [f.value for f in mem.list_facts("alice", category="Work")] == ["coffee"]
    assert mem.list_facts("carol") == []
    with pytest.raises(ConflictError):  # the schema itself refuses duplicates
        raw(mem).execute(
            "INSERT INTO facts (scope, category, key, value, source, created_at, updated_at) "
            "VALUES ('alice', 'food', 'drink', 'x', 'agent', 'now', 'now')"
        )


def test_setting_a_new_value_supersedes_and_keeps_history(mem: mindfile.Mindfile) -> None:
    first = mem.set_fact("alice", "home", "city", "Lisbon", source="user")
    second = mem.set_fact("alice", "home", "city", "Porto")
    third = mem.set_fact("alice", "home", "city", "Braga")
    assert third.created_at == first.created_at and third.updated_at > second.updated_at
    history = mem.fact_history("alice", "home", "city")
    assert [(v.value, v.source, v.reason) for v in history] == [
        ("Porto", "agent", "updated"),
        ("Lisbon", "user", "updated"),
    ]
    # "What did we believe before, and when did that change?"
    assert history[0].updated_at == second.updated_at
    assert history[0].superseded_at == third.updated_at
    assert history[1].superseded_at == second.updated_at
    assert mem.get_fact("alice", "home", "city").value == "Braga"  # type: ignore[union-attr]


def test_setting_the_same_value_is_a_no_op(mem: mindfile.Mindfile) -> None:
    fact = mem.set_fact("alice", "home", "city", "Lisbon")
    before = snapshot(mem)
    assert mem.set_fact("alice", "home", "city", "Lisbon") == fact
    assert snapshot(mem) == before
    changed = mem.set_fact("alice", "home", "city", "Lisbon", source="user")  # new provenance
    assert changed.source == "user" and len(mem.fact_history("alice", "home", "city")) == 1


def test_retiring_keeps_the_value_in_history_deleting_erases_it(mem: mindfile.Mindfile) -> None:
    mem.set_fact("alice", "home", "city", "Lisbon")
    mem.set_fact("alice", "home", "city", "Porto")
    assert mem.delete_fact("alice", "home", "city", keep_history=True) is True
    assert mem.get_fact("alice", "home", "city") is None
    assert [(v.value, v.reason) for v in mem.fact_history("alice", "home", "city")] == [
        ("Porto", "deleted"),
        ("Lisbon", "updated"),
    ]
    assert mem.delete_fact("alice", "home", "city", keep_history=True) is False
    mem.set_fact("alice", "home", "city", "Faro")
    assert mem.delete_fact("alice", "home", "city") is True
    assert mem.fact_history("alice", "home", "city") == []
    assert raw(mem).scalar("SELECT count(*) FROM fact_history") == 0


def test_forgetting_the_facts_session_deletes_the_facts(mem: mindfile.Mindfile) -> None:
    mem.set_fact("alice", "home", "city", "Lisbon")
    mem.set_fact("alice", "home", "city", "Porto")
    mem.set_fact("bob", "home", "city", "Faro")
    assert mem.forget("facts:alice") is True
    assert mem.list_facts("alice") == []
    assert mem.fact_history("alice", "home", "city") == []
    assert [f.value for f in mem.list_facts("bob")] == ["Faro"]


def test_facts_are_searchable_and_reindexed_atomically(mem: mindfile.Mindfile) -> None:
    mem.set_fact("alice", "pets", "dog name", "Biscuit")
    mem.set_fact("alice", "home", "city", "Lisbon")
    session = facts_session("alice")
    assert session == "facts:alice"
    hits = mem.search("Biscuit", session_id=session, mode="fts")
    assert [h.text for h in hits] == ["pets / dog name: Biscuit"]
    assert hits[0].metadata["kind"] == "fact" and hits[0].metadata["key"] == "dog name"
    mem.set_fact("alice", "pets", "dog name", "Rex")
    assert fts_match(mem, "biscuit") == [] and fts_match(mem, "rex") == ["pets / dog name: Rex"]
    assert raw(mem).scalar("SELECT count(*) FROM chunks WHERE session_id = ?", (session,)) == 2
    ns = "memory:alice"
    found = mem.search_notes(ns, "dog name", facts_scope="alice")
    assert found[0].to_dict() == {
        "kind": "fact",
        "category": "pets",
        "key": "dog name",
        "text": "pets / dog name: Rex",
        "score": found[0].to_dict()["score"],
    }
    assert mem.search_notes(ns, "dog name") == []  # facts only when asked for
    mem.delete_fact("alice", "pets", "dog name")
    assert fts_match(mem, "rex") == []
    assert raw(mem).scalar("SELECT count(*) FROM chunks WHERE session_id = ?", (session,)) == 1
    assert_index_consistent(mem)


def test_long_values_span_several_chunks_and_are_all_replaced(mem: mindfile.Mindfile) -> None:
    value = " ".join(f"Detail {i} of the allergy list." for i in range(60))
    mem.set_fact("alice", "health", "allergies", value)
    session = facts_session("alice")
    assert raw(mem).scalar("SELECT count(*) FROM chunks WHERE session_id = ?", (session,)) > 1
    mem.set_fact("alice", "health", "allergies", "none")
    assert raw(mem).scalar("SELECT count(*) FROM chunks WHERE session_id = ?", (session,)) == 1
    assert_index_consistent(mem)


def test_an_embedding_failure_leaves_the_fact_and_history_intact(db_path: Path) -> None:
    embedder = FlakyEmbedder()
    with mindfile.open(db_path, embedder=embedder) as mem:
        fact = mem.set_fact("alice", "home", "city", "Lisbon")
        before = snapshot(mem)
        embedder.fail = True
        with pytest.raises(EmbeddingError):
            mem.set_fact("alice", "home", "city", "Porto")
        assert snapshot(mem) == before
        assert mem.get_fact("alice", "home", "city") == fact


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("", "c", "k", "v"), InvalidInputError),
        (("s", "", "k", "v"), InvalidInputError),
        (("s", "c", "  ", "v"), InvalidInputError),
        (("s", "c", "k", ""), InvalidInputError),
        (("s", "c", "k", 5), InvalidInputError),
        (("s", 5, "k", "v"), InvalidInputError),
        (("s", "c" * 129, "k", "v"), LimitExceededError),
        (("s", "c", "k", "v" * 4001), LimitExceededError),
        (("s", "c", "k", "bad \ud800"), InvalidInputError),
    ],
)
def test_bad_input_is_rejected(
    mem: mindfile.Mindfile, args: tuple[object, ...], error: type
) -> None:
    with pytest.raises(error):
        mem.set_fact(*args)  # type: ignore[arg-type]
    assert raw(mem).scalar("SELECT count(*) FROM facts") == 0


def test_bad_source_is_rejected(mem: mindfile.Mindfile) -> None:
    with pytest.raises(InvalidInputError):
        mem.set_fact("alice", "c", "k", "v", source="robot")  # type: ignore[arg-type]


def test_facts_persist_across_reopen(db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash") as mem:
        mem.set_fact("alice", "home", "city", "Lisbon")
        mem.set_fact("alice", "home", "city", "Porto")
    with mindfile.open(db_path) as mem:
        assert mem.get_fact("alice", "home", "city").value == "Porto"  # type: ignore[union-attr]
        assert [v.value for v in mem.fact_history("alice", "home", "city")] == ["Lisbon"]
