"""Neighbour smoothing (mindfile/retrieve/neighbors.py): a memory within two turns of a
strong match in its own conversation gets half of that match's score."""

from __future__ import annotations

import pytest

import mindfile
from mindfile.retrieve.neighbors import NeighborConfig, lift

CFG = NeighborConfig(weight=0.5, window=2)


def test_lift_is_the_best_neighbour_within_the_window_of_the_same_session() -> None:
    scores = {1: 0.9, 2: 0.1, 3: 0.4, 4: 0.2, 5: 0.8, 6: 0.7}
    positions = {
        1: ("a", 10),
        2: ("a", 11),  # next to 1 (0.9) and 3 (0.4)
        3: ("a", 12),  # within 2 of 1 and 2
        4: ("a", 15),  # nobody within 2 turns
        5: ("b", 11),  # another session: never lends to "a"
        6: ("b", 11),  # a second chunk of the same event: distance 0
    }
    got = lift(scores, positions, CFG)
    assert got == pytest.approx({1: 0.2, 2: 0.45, 3: 0.45, 5: 0.35, 6: 0.4})
    assert 4 not in got


def test_no_lift_without_neighbours_or_with_weight_zero() -> None:
    assert lift({1: 1.0}, {1: ("a", 1)}, CFG) == {}
    assert lift({1: 0.0, 2: 0.0}, {1: ("a", 1), 2: ("a", 2)}, CFG) == {}
    wide = lift({1: 1.0, 2: 0.5}, {1: ("a", 1), 2: ("a", 9)}, NeighborConfig(0.5, 10))
    assert wide == pytest.approx({1: 0.25, 2: 0.5})


def test_the_answer_after_the_question_turn_climbs(any_mem: mindfile.Mindfile) -> None:
    """The turn that repeats the query's words is a strong match; the reply after it,
    which shares none of them, rises above unrelated memories next to nothing."""
    any_mem.store_many(
        [
            ("trip", 1, "Where did you spend the long weekend in March?"),
            ("trip", 2, "Mostly on a sailboat off the Algarve coast with cousins."),
            ("trip", 3, "Sounds lovely."),
            ("other", 1, "My cousin sold his old sailboat last year."),
            ("other", 2, "Groceries: eggs, rice, tomatoes."),
        ]
    )
    query = "where did you spend the long weekend in March"
    on = any_mem.search(query, top_k=5)
    off = any_mem.search(query, top_k=5, neighbors=False)
    by_text = {hit.text: hit for hit in on}
    question = by_text["Where did you spend the long weekend in March?"]
    answer = by_text["Mostly on a sailboat off the Algarve coast with cousins."]
    assert question.breakdown.neighbors is not None and answer.breakdown.neighbors is not None
    # The answer's lift is half of the question's own score (before its own lift).
    question_base = question.breakdown.fused - question.breakdown.neighbors
    answer_base = answer.breakdown.fused - answer.breakdown.neighbors
    assert answer.breakdown.neighbors == pytest.approx(0.5 * max(question_base, 0.0), abs=1e-6)
    assert question.breakdown.neighbors == pytest.approx(0.5 * answer_base, abs=1e-6)
    # Another session's turn at the same position borrows only from its own session.
    cousin = by_text["My cousin sold his old sailboat last year."]
    groceries = by_text.get("Groceries: eggs, rice, tomatoes.")
    own = 0.0
    if groceries is not None and groceries.breakdown.neighbors is not None:
        own = 0.5 * max(groceries.breakdown.fused - groceries.breakdown.neighbors, 0.0)
    assert cousin.breakdown.neighbors == pytest.approx(own, abs=1e-6)
    assert cousin.breakdown.neighbors < answer.breakdown.neighbors
    # Off: no lift, every score is the fused one.
    assert all(hit.breakdown.neighbors is None for hit in off)
    off_scores = {hit.text: hit.score for hit in off}
    for hit in on:
        if hit.text in off_scores and hit.breakdown.neighbors is not None:
            assert hit.score == pytest.approx(off_scores[hit.text] + hit.breakdown.neighbors)
    ranked_on = [hit.text for hit in on]
    assert ranked_on.index(answer.text) < ranked_on.index(cousin.text)


def test_single_leg_modes_rank_by_their_leg_alone(any_mem: mindfile.Mindfile) -> None:
    any_mem.store_many([("s", i, f"note {i} about the garden shed") for i in range(1, 6)])
    for mode in ("vector", "fts"):
        hits = any_mem.search("garden shed", mode=mode, top_k=5)
        assert hits and all(hit.breakdown.neighbors is None for hit in hits)


def test_neighbors_must_be_a_bool(any_mem: mindfile.Mindfile) -> None:
    any_mem.store("s", 1, "hello")
    with pytest.raises(mindfile.InvalidInputError, match="neighbors"):
        any_mem.search("hello", neighbors="yes")  # type: ignore[arg-type]


def test_chunks_around_finds_the_turns_within_the_window_of_the_same_session(
    any_mem: mindfile.Mindfile,
) -> None:
    from mindfile.storage.backend import search_store

    any_mem.store_many([(s, i, f"{s} turn {i}") for s in ("a", "b") for i in range(1, 9)])
    ids = dict(any_mem.db.query("SELECT chunk_text, id FROM chunks"))
    around = search_store(any_mem.db).chunks_around([ids["a turn 4"], ids["b turn 1"]], 2)
    assert {a for a, _, _, _ in around} == {ids["a turn 4"], ids["b turn 1"]}
    got = sorted((session, seq) for _, _, session, seq in set(around))
    assert got == [("a", 2), ("a", 3), ("a", 4), ("a", 5), ("a", 6), ("b", 1), ("b", 2), ("b", 3)]
    assert search_store(any_mem.db).chunks_around([], 2) == []
