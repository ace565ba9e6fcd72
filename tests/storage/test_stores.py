"""Conformance of the per-aggregate stores (mindfile.storage.stores) on every backend.

What the public API covers already (notes, facts, scratchpads, summaries, marks through
``Mindfile``) is tested in tests/memory and tests/manage; these tests pin the stores'
own contracts — return values, ordering, filters, compare-and-swap, transactions — on
every backend (the ``seam`` fixture: SQLite and Postgres), without the feature code on top.
"""

from __future__ import annotations

import pytest

import mindfile
from mindfile.errors import ConflictError
from mindfile.manage.importance import USE_BOOST
from mindfile.storage.marks import EventState
from mindfile.storage.stores import Stores

from ._seam import Seam

NOW = "2026-01-01T00:00:00.000000+00:00"
LATER = "2026-01-02T00:00:00.000000+00:00"


def test_the_backend_composes_one_store_per_aggregate(seam: Seam) -> None:
    stores = seam.stores
    assert isinstance(stores, Stores)
    names = ("events", "notes", "facts", "session_state", "llm_failures", "marks", "integrity")
    assert all(getattr(stores, name) is not None for name in names)


# -- events --------------------------------------------------------------------------


def test_events_after_exists_and_recent(seam: Seam) -> None:
    events = seam.stores.events
    for seq in (1, 2, 5):
        seam.add_event("s1", seq, f"message {seq}")
    assert [r.sequence for r in events.after("s1", 1)] == [2, 5]
    assert events.after("s1", 5) == []
    assert events.after("missing", -1) == []
    assert [r.payload["content"] for r in events.after("s1", -1)] == [
        "message 1",
        "message 2",
        "message 5",
    ]
    assert events.exists("s1", 2) and not events.exists("s1", 3)
    assert [r.sequence for r in events.recent("s1", 2)] == [2, 5]
    assert [r.sequence for r in events.recent("s1", None)] == [1, 2, 5]


# -- notes ---------------------------------------------------------------------------


def test_notes_find_list_and_remove(seam: Seam) -> None:
    notes = seam.stores.notes
    a = seam.add_note("ns", "a", "apples are red", tags=["fruit"])
    b = seam.add_note("ns", "b", "the sky is blue", tags=["sky", "fruit"])
    found = notes.find("ns", "a")
    assert found is not None and found.sequence == a
    assert found.payload["content"] == "apples are red" and found.payload["kind"] == "note"
    assert notes.find("ns", "zz") is None and notes.find("other", "a") is None
    assert notes.sequence_of("ns", "b") == b
    assert notes.sequence_of("ns", "zz") is None
    # Most recent event first; every tag must match; limit and offset page.
    assert [n.payload["note_id"] for n in notes.list_notes("ns", [], 10, 0)] == ["b", "a"]
    assert [n.payload["note_id"] for n in notes.list_notes("ns", ["fruit"], 10, 0)] == ["b", "a"]
    assert [n.payload["note_id"] for n in notes.list_notes("ns", ["sky", "fruit"], 10, 0)] == ["b"]
    assert [n.payload["note_id"] for n in notes.list_notes("ns", [], 1, 1)] == ["a"]
    assert notes.list_notes("ns", ["nope"], 10, 0) == []
    # remove: the chunks, and with the sequence the event and its index row.
    assert notes.remove("ns", "a", a) >= 1
    assert notes.find("ns", "a") is None
    assert not seam.stores.events.exists("ns", a)
    assert seam.chunk_texts("ns") == ["the sky is blue"]
    assert notes.remove("ns", "a", None) == 0  # nothing left


def test_notes_link_needs_the_event(seam: Seam) -> None:
    notes = seam.stores.notes
    seam.add_event("ns", 7, "a plain event")
    with seam.atomic():
        notes.link("ns", "linked", 7)
    found = notes.find("ns", "linked")
    assert found is not None and found.sequence == 7
    # No event 8: a broken constraint is a conflict.
    with pytest.raises(ConflictError), seam.atomic():
        notes.link("ns", "dangling", 8)
    assert notes.find("ns", "dangling") is None


# -- facts ---------------------------------------------------------------------------


def test_facts_rows_and_history(seam: Seam) -> None:
    facts = seam.stores.facts
    with seam.atomic():
        facts.insert("u1", "food", "likes", "pizza", "agent", NOW)
        facts.insert("u1", "food", "hates", "olives", "user", NOW)
        facts.insert("u1", "city", "home", "Lisbon", "user", NOW)
        facts.insert("u2", "food", "likes", "sushi", "agent", NOW)
    row = facts.get("u1", "food", "likes")
    assert row is not None
    assert (row.value, row.source, row.created_at, row.updated_at) == ("pizza", "agent", NOW, NOW)
    assert facts.get("u1", "food", "nope") is None
    assert [(f.category, f.key) for f in facts.list_facts("u1", None)] == [
        ("city", "home"),
        ("food", "hates"),
        ("food", "likes"),
    ]
    assert [f.key for f in facts.list_facts("u1", "food")] == ["hates", "likes"]
    assert facts.list_facts("nobody", None) == []

    with seam.atomic():
        facts.archive(row.id, LATER, "updated")
        facts.update(row.id, "pasta", "user", LATER)
    now_row = facts.get("u1", "food", "likes")
    assert now_row is not None and now_row.id == row.id
    assert (now_row.value, now_row.source, now_row.created_at) == ("pasta", "user", NOW)
    assert now_row.updated_at == LATER
    with seam.atomic():
        facts.archive(row.id, LATER, "deleted")
        facts.delete(row.id)
    assert facts.get("u1", "food", "likes") is None
    history = facts.history("u1", "food", "likes")
    assert [(v.value, v.reason) for v in history] == [("pasta", "deleted"), ("pizza", "updated")]
    assert history[1].superseded_at == LATER and history[1].created_at == NOW
    assert facts.history("u2", "food", "likes") == []
    assert facts.erase_history("u1", "food", "likes") == 2
    assert facts.erase_history("u1", "food", "likes") == 0
    assert facts.history("u1", "food", "likes") == []


def test_facts_are_listed_in_byte_order(seam: Seam) -> None:
    """Keys sort as SQLite's BINARY collation on every backend (not the locale's order)."""
    keys = ["b", "B", "a", "\u00e9", "A", "_x", "10", "9"]
    with seam.atomic():
        for key in keys:
            seam.stores.facts.insert("u1", "c", key, "v", "agent", NOW)
    listed = [f.key for f in seam.stores.facts.list_facts("u1", "c")]
    assert listed == sorted(keys, key=lambda k: k.encode())


def test_fact_chunks_are_removed_by_key(seam: Seam) -> None:
    session = seam.add_fact("u1", "food", "likes", "pizza margherita")
    seam.add_fact("u1", "food", "hates", "olives tapenade")
    with seam.atomic():
        seam.stores.facts.remove_chunks(session, "food", "likes")
    assert seam.chunk_texts(session) == ["food / hates: olives tapenade"]


# -- session state -------------------------------------------------------------------


def test_summary_compare_and_swap(seam: Seam) -> None:
    states = seam.stores.session_state
    seam.add_event("s1", 1, "hello")
    assert states.read_summary("s1") is None and states.summary_epoch("s1") == 0
    assert states.swap_summary("s1", 0, '{"summary": "one", "epoch": 1}', NOW) is True
    assert states.read_summary("s1") == {"summary": "one", "epoch": 1}
    assert states.summary_epoch("s1") == 1
    # A writer holding a stale epoch loses and changes nothing.
    assert states.swap_summary("s1", 0, '{"summary": "stale", "epoch": 1}', LATER) is False
    assert states.swap_summary("s1", 1, '{"summary": "two", "epoch": 2}', LATER) is True
    assert states.read_summary("s1") == {"summary": "two", "epoch": 2}
    assert states.swap_summary("s1", 1, '{"summary": "late", "epoch": 2}', LATER) is False
    assert states.summary_epoch("s1") == 2
    assert states.summary_epoch("missing") == 0


def test_scratchpad_and_summary_share_a_session(seam: Seam) -> None:
    states = seam.stores.session_state
    seam.add_event("s1", 1, "hello")
    with seam.atomic():
        states.write_scratchpad("s1", '{"items": ["a"], "updated_at": "t1"}', NOW)
    assert states.swap_summary("s1", 0, '{"summary": "s", "epoch": 1}', NOW)
    assert states.read_scratchpad("s1") == {"items": ["a"], "updated_at": "t1"}
    with seam.atomic():
        states.write_scratchpad("s1", '{"items": ["b", "c"], "updated_at": "t2"}', LATER)
    assert states.read_scratchpad("s1") == {"items": ["b", "c"], "updated_at": "t2"}
    assert states.read_summary("s1") == {"summary": "s", "epoch": 1}  # not clobbered
    assert states.clear_scratchpad("s1", LATER) is True
    assert states.clear_scratchpad("s1", LATER) is False
    assert states.read_scratchpad("s1") is None
    assert states.read_summary("s1") == {"summary": "s", "epoch": 1}
    assert states.clear_scratchpad("missing", LATER) is False


# -- LLM failures --------------------------------------------------------------------


def _record(seam: Seam, task: str, scope: str | None, session: str | None) -> int:
    return seam.stores.llm_failures.record(
        task=task,
        reason="timeout",
        message="the model did not answer",
        model="m1",
        scope=scope,
        session_id=session,
        raw_excerpt="caf\u00e9 \u2603",
        details={"attempt": 2, "note": "na\u00efve"},
        created_at=NOW,
    )


def test_llm_failures_record_list_delete(seam: Seam) -> None:
    failures = seam.stores.llm_failures
    first = _record(seam, "facts", "u1", "s1")
    second = _record(seam, "notes", "u1", "s2")
    third = _record(seam, "facts", "u2", None)
    assert first < second < third
    listed = failures.list_failures(None, None, 10)
    assert [f.id for f in listed] == [third, second, first]  # newest first
    assert listed[-1].details == {"attempt": 2, "note": "na\u00efve"}
    assert listed[-1].raw_excerpt == "caf\u00e9 \u2603" and listed[0].session_id is None
    assert [f.id for f in failures.list_failures("facts", None, 10)] == [third, first]
    assert [f.id for f in failures.list_failures("facts", "u1", 10)] == [first]
    assert [f.id for f in failures.list_failures(None, None, 1)] == [third]
    # Every filter given must match.
    assert failures.delete([first, second], "u2", None) == 0
    assert failures.delete(None, "u1", "s2") == 1
    assert failures.delete([], None, None) == 0  # an empty id list matches nothing
    assert failures.delete([first], None, None) == 1
    assert failures.delete(None, None, None) == 1  # no filter at all: every row
    assert failures.list_failures(None, None, 10) == []


# -- marks ---------------------------------------------------------------------------


def test_marks_on_an_event_s_chunks(seam: Seam) -> None:
    marks = seam.stores.marks
    seam.add_event("s1", 1, "remember the blue door")
    seam.add_event("s1", 2, "")  # nothing to index: no chunks
    assert marks.event_state("s1", 2) is None
    assert marks.set_importance("s1", 2, 0.9) == 0
    with seam.atomic():
        assert marks.set_importance("s1", 1, 0.8) == 1
        assert marks.set_pinned("s1", 1, True) == 1
    state = marks.event_state("s1", 1)
    assert state is not None
    assert (state.importance, state.pinned, state.access_count) == (0.8, True, 0)
    assert state.last_accessed_at is None
    assert marks.set_pinned("s1", 1, False) == 1
    assert marks.set_importance("s9", 1, 0.5) == 0


def test_marks_record_use_and_restore(seam: Seam) -> None:
    marks = seam.stores.marks
    seam.add_event("s1", 1, "the meeting moved to Friday")
    [chunk_id] = seam.chunk_ids("s1")
    before = marks.event_state("s1", 1)
    assert before is not None
    with seam.atomic():
        assert marks.record_use([chunk_id, "ch_unknown"], NOW, USE_BOOST) == 1
    assert marks.record_use([], NOW, USE_BOOST) == 0
    after = marks.event_state("s1", 1)
    assert after is not None
    assert after.importance == pytest.approx(
        before.importance + USE_BOOST * (1 - before.importance)
    )
    assert (after.access_count, after.last_accessed_at) == (1, NOW)
    # restore_state carries a pin and use statistics over, never lowering the count.
    with seam.atomic():
        marks.restore_state("s1", 1, EventState(0.1, True, None, 5, LATER))
    restored = marks.event_state("s1", 1)
    assert restored is not None
    assert (restored.pinned, restored.access_count, restored.last_accessed_at) == (True, 5, LATER)
    assert restored.importance == after.importance  # importance is not part of it
    with seam.atomic():
        marks.restore_state("s1", 1, EventState(0.1, False, None, 2, None))
    kept = marks.event_state("s1", 1)
    assert kept is not None
    assert (kept.pinned, kept.access_count, kept.last_accessed_at) == (False, 5, LATER)


# -- integrity -----------------------------------------------------------------------


def test_integrity_counts_and_repairs(seam: Seam) -> None:
    check = seam.stores.integrity
    assert (check.chunk_count(), check.vector_count(), check.text_index_rows()) == (0, 0, 0)
    for seq, text in enumerate(["red apples", "blue skies", "green grass"], start=1):
        seam.add_event("s1", seq, text)
    chunks = check.chunk_count()
    assert chunks == 3 and check.vector_count() == 3 and check.text_index_rows() == 3
    assert check.unembedded() == [] and check.orphan_vectors() == []
    model, dims = seam.model_id, seam.dimensions
    assert check.foreign_vectors(model, dims) == []
    everything = sorted(check.foreign_vectors("another-model", dims))
    assert len(everything) == 3 and sorted(check.foreign_vectors(model, dims + 1)) == everything
    with seam.atomic():
        check.drop_vectors(everything[:2])
    assert check.vector_count() == 1
    assert sorted(check.unembedded()) == [(everything[0], None), (everything[1], None)]
    with seam.atomic():
        check.rebuild_text_index()
    assert check.text_index_rows() == chunks


def test_the_reconciler_repairs_what_integrity_finds(store_backend: mindfile.Mindfile) -> None:
    mem, check = store_backend, store_backend.stores.integrity
    for seq, text in enumerate(["red apples", "blue skies", "green grass"], start=1):
        mem.store("s1", seq, {"role": "user", "content": text})
    everything = sorted(check.foreign_vectors("another-model", mem.embedder.dimensions))
    with mem.db.atomic():
        check.drop_vectors(everything[:2])
    # The reconciler puts the dropped vectors back (a sync store embeds at once).
    report = mem.reconcile()
    assert report.enqueued == 2 and check.vector_count() == 3 and check.unembedded() == []
