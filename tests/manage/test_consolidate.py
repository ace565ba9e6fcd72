"""Consolidation: near-duplicate merge with provenance, span summaries, idempotence."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest
from backends import raw

import mindfile
from mindfile.errors import InvalidInputError
from mindfile.memory import notes_session
from mindfile.types import MemoryRecord

from ._support import age_event, ago, assert_consistent, chunk_row, chunk_rows, snapshot


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


def chunk_texts(mem: mindfile.Mindfile, session_id: str) -> list[str]:
    rows = raw(mem).query(
        "SELECT chunk_text FROM chunks WHERE session_id = ? ORDER BY id", (session_id,)
    )
    return [r[0] for r in rows]


def test_exact_meaning_duplicates_merge_into_the_earliest(mem: mindfile.Mindfile) -> None:
    # The hash embedder gives texts differing only in case and spacing the same vector.
    mem.store("s", 1, {"role": "user", "content": "I moved to Lisbon"}, tags=["home"])
    mem.store("s", 2, {"role": "assistant", "content": "noted"})
    mem.store(
        "s", 3, {"role": "user", "content": "i MOVED to lisbon"}, importance=0.9, tags=["move"]
    )
    mem.store("s", 4, {"role": "user", "content": "I   moved to LISBON"})
    mem.store("other", 1, {"role": "user", "content": "i moved to lisbon"})  # other session
    survivor = chunk_row(mem, "s", 1)
    mem.record_use([chunk_row(mem, "s", 3)["chunk_id"]])

    report = mem.consolidate(older_than=None)
    assert (report.merged_groups, report.merged_chunks, report.summaries) == (1, 2, 0)
    assert chunk_texts(mem, "s") == ["I moved to Lisbon", "noted"]
    assert chunk_texts(mem, "other") == ["i moved to lisbon"]  # never across sessions
    row = chunk_row(mem, "s", 1)
    assert row["chunk_id"] == survivor["chunk_id"]
    assert row["importance"] == pytest.approx(0.9 + 0.05 * 0.1)  # the group's highest
    assert (row["sequence_start"], row["sequence_end"]) == (1, 4)
    assert row["access_count"] == 1 and row["consolidated_at"] == report.now
    hits = mem.search("moved Lisbon", session_id="s", mode="fts")
    assert hits[0].chunk_id == survivor["chunk_id"]
    assert hits[0].metadata["tags"] == ["home", "move"]
    # Every event is still held by a chunk: the log is intact and marking still works.
    assert [r.sequence for r in mem.recall("s")] == [1, 2, 3, 4]
    assert chunk_row(mem, "s", 3)["chunk_id"] == survivor["chunk_id"]
    (record,) = mem.provenance(survivor["chunk_id"])
    assert record.kind == "merge" and record.session_id == "s"
    assert [(s["sequence_start"], s["text"]) for s in record.sources] == [
        (3, "i MOVED to lisbon"),
        (4, "I moved to LISBON"),  # chunk text is whitespace-normalised
    ]
    assert record.to_dict()["sources"][0]["importance"] == pytest.approx(0.905)
    assert_consistent(mem)


def test_a_merged_statement_stays_a_statement(mem: mindfile.Mindfile) -> None:
    """The survivor's ``user_statement`` is recomputed with its merged metadata; the
    absorbed chunks leave the statement set."""
    from mindfile.retrieve.preferences import store_marks

    mem.store("s", 1, {"role": "user", "content": "I love hiking in the Alps"}, tags=["a"])
    mem.store("s", 2, {"role": "user", "content": "i LOVE hiking in the alps"}, tags=["b"])
    mem.store("s", 3, {"role": "assistant", "content": "noted"})
    assert len(store_marks(mem.db)) == 2
    report = mem.consolidate(older_than=None)
    assert (report.merged_groups, report.merged_chunks) == (1, 1)
    flags = raw(mem).query(
        "SELECT id, user_statement FROM chunks WHERE session_id = ? ORDER BY id", ("s",)
    )
    assert [int(f) for _, f in flags] == [1, 0]
    assert store_marks(mem.db) == frozenset({int(flags[0][0])})
    assert_consistent(mem)


def test_consolidation_is_idempotent(mem: mindfile.Mindfile) -> None:
    for seq, text in enumerate(["Alpha beta", "alpha BETA", "gamma", "Gamma", "delta"], start=1):
        mem.store("s", seq, {"role": "user", "content": text})
    for seq in range(1, 6):
        age_event(mem, "s", seq, ago(days=30))
    first = mem.consolidate(max_span=10)
    assert first.merged_chunks == 2 and first.summaries == 1
    state = snapshot(mem)
    second = mem.consolidate(max_span=10)
    assert (second.merged_groups, second.merged_chunks, second.summaries) == (0, 0, 0)
    assert second.summarized_events == 0 and second.dropped_chunks == 0
    assert snapshot(mem) == state
    assert_consistent(mem)


def test_pinned_chunks_are_never_merged_away(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "Keep this exact wording")
    mem.store("s", 2, "keep this EXACT wording")
    mem.store("s", 3, "KEEP this exact wording")
    mem.pin("s", 2)
    report = mem.consolidate(older_than=None)
    # The pinned chunk survives and absorbs the others; nothing pinned is deleted.
    assert report.merged_chunks == 2
    assert chunk_texts(mem, "s") == ["keep this EXACT wording"]
    assert chunk_row(mem, "s", 2)["pinned"] == 1
    mem.store("s", 4, "keep THIS exact wording")
    mem.pin("s", 4)
    assert mem.consolidate(older_than=None).merged_chunks == 0  # two pinned: both stay


def test_notes_and_facts_are_not_merged(mem: mindfile.Mindfile) -> None:
    ns = notes_session("ann")
    mem.store_note(ns, "n1", "Ann likes green tea")
    mem.store_note(ns, "n2", "ann likes GREEN tea")
    mem.set_fact("ann", "drinks", "tea", "green")
    before = snapshot(mem)
    report = mem.consolidate(older_than=0)
    assert report.merged_chunks == 0 and report.summaries == 0
    assert snapshot(mem) == before


def test_semantic_near_duplicates_merge_with_the_default_model(
    mem_static: mindfile.Mindfile,
) -> None:
    mem = mem_static
    mem.store("s", 1, {"role": "user", "content": "My sister lives in Lisbon, Portugal."})
    mem.store("s", 2, {"role": "user", "content": "I booked a flight to Tokyo for next week."})
    mem.store("s", 3, {"role": "user", "content": "My sister is living in Lisbon in Portugal."})
    mem.store(
        "s", 4, {"role": "user", "content": "Remember: I booked a flight to Tokyo next week!"}
    )
    mem.store("s", 5, {"role": "user", "content": "Please book a table for two at 8pm."})
    report = mem.consolidate(older_than=None)
    assert (report.merged_groups, report.merged_chunks) == (2, 2)
    assert chunk_texts(mem, "s") == [
        "My sister lives in Lisbon, Portugal.",
        "I booked a flight to Tokyo for next week.",
        "Please book a table for two at 8pm.",
    ]
    assert mem.consolidate(older_than=None).merged_chunks == 0
    strict = mem.consolidate(older_than=None, similarity=0.999)
    assert strict.merged_chunks == 0
    assert_consistent(mem)


def conversation(mem: mindfile.Mindfile, n: int, *, old: int) -> None:
    """``n`` turns in session ``s``; the first ``old`` of them 30 days old."""
    for seq in range(1, n + 1):
        role = "user" if seq % 2 else "assistant"
        mem.store("s", seq, {"role": role, "content": f"Turn {seq} talks about topic {seq}."})
    for seq in range(1, old + 1):
        age_event(mem, "s", seq, ago(days=30))


def test_old_spans_are_condensed_into_linked_summary_chunks(mem: mindfile.Mindfile) -> None:
    conversation(mem, 12, old=10)
    mem.pin("s", 6)  # a pinned event breaks a span and is never summarized
    report = mem.consolidate(max_span=4, similarity=None)
    # Old events 1-10 minus pinned 6: runs 1-5 and 7-10 -> spans [1-4], [5], [7-10];
    # the single-event span waits for min_span.
    assert (report.summaries, report.summary_chunks, report.summarized_events) == (2, 2, 8)
    summaries = raw(mem).query(
        "SELECT chunk_id, chunk_text, sequence_start, sequence_end, consolidated_at "
        "FROM chunks WHERE json_extract(metadata_json, '$.kind') = 'summary' ORDER BY id"
    )
    assert [(r[2], r[3]) for r in summaries] == [(1, 4), (7, 10)]
    assert summaries[0][1].startswith("- user: Turn 1 talks about topic 1.")
    assert all(r[4] == report.now for r in summaries)
    for seq in (1, 2, 3, 4):
        kinds = {r["chunk_id"] for r in chunk_rows(mem, "s", seq)}
        assert summaries[0][0] in kinds
        originals = [r for r in chunk_rows(mem, "s", seq) if r["chunk_id"] != summaries[0][0]]
        assert originals and all(r["consolidated_at"] == report.now for r in originals)
    for seq in (5, 6, 11, 12):
        assert all(r["consolidated_at"] is None for r in chunk_rows(mem, "s", seq))
    (record,) = mem.provenance(summaries[1][0])
    assert record.kind == "summary" and [s["sequence"] for s in record.sources] == [7, 8, 9, 10]
    hit = mem.search("topic 8", session_id="s", mode="fts", top_k=10)
    assert any(h.metadata.get("kind") == "summary" for h in hit)
    assert [r.sequence for r in mem.recall("s")] == list(range(1, 13))  # the log is kept
    assert_consistent(mem)
    again = snapshot(mem)
    assert mem.consolidate(max_span=4, similarity=None).summaries == 0
    assert snapshot(mem) == again


def test_a_custom_condenser_and_dropping_originals(mem: mindfile.Mindfile) -> None:
    conversation(mem, 6, old=6)
    mem.store("t", 1, "Turn 1 talks about topic 1.")  # same text in another session
    seen: list[list[int]] = []

    def condenser(records: Sequence[MemoryRecord]) -> str:
        seen.append([r.sequence for r in records])
        return f"LLM summary of {len(records)} turns about topics."

    report = mem.consolidate(
        session_id="s", similarity=None, max_span=3, condenser=condenser, drop_originals=True
    )
    assert seen == [[1, 2, 3], [4, 5, 6]]
    assert (report.summaries, report.dropped_chunks, report.sessions) == (2, 6, 1)
    assert chunk_texts(mem, "s") == [
        "LLM summary of 3 turns about topics.",
        "LLM summary of 3 turns about topics.",
    ]
    assert chunk_texts(mem, "t") == ["Turn 1 talks about topic 1."]
    # The events stay in the log, held by their summary chunk.
    assert [r.sequence for r in mem.recall("s")] == [1, 2, 3, 4, 5, 6]
    assert_consistent(mem)
    assert mem.consolidate(session_id="s", condenser=condenser).summaries == 0


def test_a_failing_condenser_writes_nothing(mem: mindfile.Mindfile) -> None:
    conversation(mem, 4, old=4)
    mem.store("s", 5, "turn 1 TALKS about topic 1.")  # a duplicate the merge would fold
    before = snapshot(mem)

    def broken(records: Sequence[MemoryRecord]) -> str:
        raise RuntimeError("model unavailable")

    with pytest.raises(RuntimeError):
        mem.consolidate(condenser=broken)
    with pytest.raises(InvalidInputError):
        mem.consolidate(condenser=lambda records: None)  # type: ignore[arg-type,return-value]
    assert snapshot(mem) == before


def test_scope_and_argument_validation(mem: mindfile.Mindfile) -> None:
    mem.store("a1", 1, "Same words here", agent_identity="bot")
    mem.store("a1", 2, "same WORDS here", agent_identity="bot")
    mem.store("b1", 1, "Same words here")
    mem.store("b1", 2, "same WORDS here")
    report = mem.consolidate(scope="agent:bot", older_than=None)
    assert (report.sessions, report.merged_chunks) == (1, 1)
    assert len(chunk_texts(mem, "b1")) == 2
    assert mem.consolidate(session_id="missing").sessions == 0
    bad: list[dict[str, object]] = [
        {"session_id": "a1", "scope": "agent:bot"},
        {"similarity": 0},
        {"similarity": 1.5},
        {"older_than": -1},
        {"older_than": "week"},
        {"min_span": 0},
        {"max_span": 1, "min_span": 2},
        {"condenser": "not callable"},
        {"scope": "bot"},
    ]
    for kwargs in bad:
        with pytest.raises(InvalidInputError):
            mem.consolidate(**kwargs)  # type: ignore[arg-type]
    assert mem.consolidate(older_than=timedelta(days=1)).summaries == 0  # nothing that old


def test_changes_between_planning_and_writing_skip_instead_of_half_applying(
    mem: mindfile.Mindfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mindfile.manage import consolidate as module

    conversation(mem, 4, old=4)
    mem.store("s", 5, "turn 1 TALKS about topic 1.")
    plan_merge, plan_spans = module._plan_merge, module._plan_spans

    def merge_then_interfere(*args: object) -> object:
        groups = plan_merge(*args)  # type: ignore[arg-type]
        mem.pin("s", 5)  # another writer pins the would-be duplicate
        return groups

    def spans_then_interfere(*args: object) -> object:
        spans = plan_spans(*args)  # type: ignore[arg-type]
        mem.pin("s", 2)  # ... and an event of the planned span
        return spans

    monkeypatch.setattr(module, "_plan_merge", merge_then_interfere)
    monkeypatch.setattr(module, "_plan_spans", spans_then_interfere)
    report = mem.consolidate()
    assert (report.merged_chunks, report.summaries, report.skipped) == (0, 0, 2)
    assert len(chunk_texts(mem, "s")) == 5
    assert_consistent(mem)
