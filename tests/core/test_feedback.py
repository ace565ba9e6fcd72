"""Feedback (mindfile/retrieve/feedback.py): the words the best results share lift, in
the ranks after the first ten, the memories that answer without the question's words."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

import mindfile
from mindfile.errors import InvalidInputError
from mindfile.retrieve import feedback
from mindfile.retrieve.feedback import expansion

QUERY = "What pets does Nate have?"
ANSWER = "this is Max! a happy dog at the park"


def _store(mem: mindfile.Mindfile) -> None:
    """12 memories with the question's words (and the answer's), the answer in a
    session of its own, 60 unrelated ones."""
    events: list[tuple[str, int, str]] = [
        (f"pets{i}", 1, f"Nate shows his pets {i}: the dog Max runs in the park") for i in range(12)
    ]
    events.append(("answer", 1, ANSWER))
    events += [
        (f"work{i}", 1, f"the quarterly review {i} covers budgets and hiring") for i in range(60)
    ]
    mem.store_many(events, user_id="alice")
    # Built now: until the BM25 index is ready (a background build), searches rank with
    # FTS5 and skip feedback.
    mem.rebuild_index()


def _key(results: mindfile.SearchResults) -> list[tuple[str, float]]:
    return [(h.chunk_id, h.score) for h in results]


def _rank(results: mindfile.SearchResults, text: str) -> int | None:
    return next((i for i, h in enumerate(results, 1) if h.text == text), None)


def test_expansion_weighs_the_best_results_words_without_the_query_s(
    mem: mindfile.Mindfile,
) -> None:
    lexical = mem.lexical
    assert lexical is not None
    terms, weights = expansion(
        lexical,
        QUERY,
        [(0.9, "Nate walks the dog Max"), (0.9, "Max the dog sleeps"), (0.2, "a cat naps")],
    )
    assert terms[:2] == ["dog", "max"]  # in both best results (ties by term)
    assert "nate" not in terms and "pet" not in terms  # the query's own words
    assert weights[0] == 1.0 and weights == sorted(weights, reverse=True)
    # Each result's words share its weight, which falls with its distance from the best:
    # "dog" has 1/4 of the first result (nate, walk, dog, max) and 1/3 of the second.
    far = math.exp(feedback.SHARPNESS * (0.2 - 0.9)) / 2  # cat, nap
    assert weights[terms.index("cat")] == pytest.approx(far / (1 / 4 + 1 / 3))
    assert weights[terms.index("walk")] == pytest.approx((1 / 4) / (1 / 4 + 1 / 3))
    assert expansion(lexical, QUERY, []) == ([], [])


def test_the_answer_without_the_questions_words_climbs_after_the_first_ten(
    any_mem: mindfile.Mindfile,
) -> None:
    mem = any_mem
    _store(mem)
    with_it = mem.search(QUERY, top_k=50)
    without = mem.search(QUERY, top_k=50, feedback=False)
    ten = mem.search(QUERY, top_k=10)
    # The first ten never change, nor their scores; top_k=10 stays a prefix.
    assert _key(with_it)[:10] == _key(without)[:10] == _key(ten)
    assert all(h.breakdown.feedback is None for h in [*with_it[:10], *without, *ten])
    rank = _rank(with_it, ANSWER)
    assert rank is not None and rank <= 13  # right after the other memories of pets
    before = _rank(without, ANSWER)
    assert before is None or before > 20
    hit = with_it[rank - 1]
    assert hit.breakdown.feedback is not None and hit.breakdown.feedback > 0.3
    assert hit.breakdown.fts is None  # it shares no word with the question
    scores = [h.score for h in with_it]
    assert scores == sorted(scores, reverse=True)
    # Deeper searches keep every earlier result and score.
    assert _key(mem.search(QUERY, top_k=20)) == _key(with_it)[:20]


def test_feedback_finds_nothing_the_search_may_not_return(any_mem: mindfile.Mindfile) -> None:
    mem = any_mem
    _store(mem)
    mem.store("bob", 1, ANSWER + " (bob)", user_id="bob")
    mem.store("gone", 1, ANSWER + " (expired)", user_id="alice", ttl=timedelta(microseconds=1))
    mem.store("other", 1, ANSWER + " (other session)", user_id="alice")
    mem.rebuild_index()
    texts = {h.text for h in mem.search(QUERY, top_k=50, user_id="alice")}
    assert ANSWER in texts and ANSWER + " (other session)" in texts
    assert ANSWER + " (bob)" not in texts and ANSWER + " (expired)" not in texts
    scoped = [f"pets{i}" for i in range(12)] + ["answer"]
    hits = mem.search(QUERY, top_k=50, session_id=scoped)
    assert {h.session_id for h in hits} <= set(scoped) and _rank(hits, ANSWER) is not None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"feedback": False},
        {"top_k": 10},
        {"mode": "vector"},
        {"mode": "fts"},
        {"fusion": "rrf"},
    ],
)
def test_feedback_does_not_run(mem: mindfile.Mindfile, kwargs: dict[str, object]) -> None:
    _store(mem)
    args: dict[str, object] = {"top_k": 50, **kwargs}
    hits = mem.search(QUERY, **args)  # type: ignore[arg-type]
    assert hits and all(h.breakdown.feedback is None for h in hits)


def test_without_a_bm25_index_there_is_no_feedback(tmp_path: object) -> None:
    with mindfile.open(":memory:", embedder="hash", lexical_index="fts5") as mem:
        _store(mem)
        assert all(h.breakdown.feedback is None for h in mem.search(QUERY, top_k=50))


def test_feedback_must_be_a_bool(mem: mindfile.Mindfile) -> None:
    with pytest.raises(InvalidInputError, match="feedback"):
        mem.search(QUERY, top_k=20, feedback="yes")  # type: ignore[arg-type]


def test_the_lift_is_weighted_and_calibrated_like_the_bm25_leg(
    mem: mindfile.Mindfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    _store(mem)
    lifts = {h.text: h.breakdown.feedback for h in mem.search(QUERY, top_k=50)}
    monkeypatch.setattr(feedback, "WEIGHT", 0.5)
    halved = {h.text: h.breakdown.feedback for h in mem.search(QUERY, top_k=50)}
    assert halved[ANSWER] == pytest.approx(lifts[ANSWER] / 2)  # type: ignore[operator]
    assert 0 < lifts[ANSWER] <= 1.0  # type: ignore[operator]


def _memories(ctx: mindfile.Context) -> dict[str, mindfile.ContextItem]:
    return {i.text: i for i in ctx.items if i.source == "memory"}


def test_build_context_admits_what_feedback_finds(any_mem: mindfile.Mindfile) -> None:
    """With a budget for more than ten memories, the context's hybrid leg is lifted by
    feedback after its first ten, as search is; a lifted memory is never more relevant
    than the tenth."""
    mem = any_mem
    _store(mem)
    mem.store_many(
        [(f"noise{i}", 1, f"the garden gate {i} squeaks after the rain") for i in range(120)],
        user_id="alice",
    )
    mem.rebuild_index()
    kwargs = {"token_budget": 4000, "user_id": "alice"}
    with_it = mem.build_context("question", QUERY, **kwargs)  # type: ignore[arg-type]
    without = mem.build_context(
        "question",
        QUERY,
        config=mindfile.ContextConfig(feedback=False),
        **kwargs,  # type: ignore[arg-type]
    )
    got, before = _memories(with_it), _memories(without)
    assert ANSWER in got and ANSWER not in before
    assert len(got) > 10
    pets = [i.explain["relevance"] for t, i in got.items() if t.startswith("Nate shows")]
    assert got[ANSWER].explain["relevance"] <= sorted(pets, reverse=True)[9] + 1e-9


def test_context_config_feedback_is_a_bool() -> None:
    with pytest.raises(mindfile.ConfigError):
        mindfile.ContextConfig(feedback="yes")  # type: ignore[arg-type]
    assert mindfile.ContextConfig().to_dict()["feedback"] is True
