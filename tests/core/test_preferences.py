"""Preference recall (issue 14): the statement and intent detectors, and the boost in a
real store (docs/retrieval.md, "Preference recall")."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mindfile
from mindfile.errors import InvalidInputError
from mindfile.retrieve.preferences import (
    recommendation_intent,
    statement_kind,
    topic_query,
    user_side,
)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("I love hiking in the Alps", "preference"),
        ("honestly I really enjoy baking bread on weekends", "preference"),
        ("I'm obsessed with Studio Ghibli", "preference"),
        ("I'm a huge fan of jazz", "preference"),
        ("Sushi is my favourite food", "preference"),
        ("I'd rather stay home than go clubbing", "preference"),
        ("can't stand horror movies", "preference"),
        ("I usually cook on Sundays", "habit"),
        ("every morning I walk to the bakery", "habit"),
        ("I've been learning Rust in the evenings", "habit"),
        ("I'm learning Spanish", "habit"),
        ("I own a 2012 Prius", "possession"),
        ("I have a golden retriever", "possession"),
        ("just got a Pixel 8", "possession"),
        ("my cats knocked over the plant again", "possession"),
        ("I'm vegetarian", "constraint"),
        ("I am allergic to peanuts", "constraint"),
        ("I can't eat gluten", "constraint"),
        ("I'm terrified of flying", "constraint"),
        ("we keep kosher at home", "constraint"),
        # negated preferences are dislikes: worth finding too
        ("I don't like sweet wines", "preference"),
        ("I'm not a fan of loud bars", "preference"),
        ("I really don't like cilantro", "preference"),
        ("I do not eat meat", "constraint"),
    ],
)
def test_statements_about_the_user_are_detected(text: str, kind: str) -> None:
    assert statement_kind(text) == kind


@pytest.mark.parametrize(
    "text",
    [
        "",
        "The weather was nice today.",
        "I love that!",  # a reaction to the other speaker, not a preference
        "I like your photo",
        "I love how you put it",
        "Have a great day!",
        "Thanks! I'll let you know.",
        "She loves hiking",  # not the user
        "Do you like sushi?",
        "I don't know",
        "I don't have to worry about it now",
        "I don't have a car",  # a negated possession is not one
        "I've been to Paris",
        "I have a question",
        "Allergies can be tough. What are you allergic to?",
    ],
)
def test_other_text_is_not_a_statement(text: str) -> None:
    assert statement_kind(text) is None


@pytest.mark.parametrize(
    "query",
    [
        "Can you recommend a video editing course?",
        "Any ideas for a weekend trip?",
        "What should I cook tonight?",
        "Suggest a restaurant dish",
        "Any tips for my interview?",
        "Gift ideas for my mum?",
        "Which laptop should I buy?",
        "Help me choose a phone",
        "Any tutorials you'd suggest?",
        "Where should we go on holiday?",
    ],
)
def test_recommendation_questions_have_intent(query: str) -> None:
    assert recommendation_intent(query)


@pytest.mark.parametrize(
    "query",
    [
        "What book did Caroline recommend to Melanie?",  # reported, not asked
        "What substitution does Nate suggest for butter?",
        "When did I go to Kyoto?",
        "What is my sister's name?",
        "Where did Maria get the idea for the shadow box?",
        "",
    ],
)
def test_other_questions_have_no_intent(query: str) -> None:
    assert not recommendation_intent(query)


def test_topic_query_drops_request_words() -> None:
    assert topic_query("Can you recommend a video editing course?") == "a video editing course?"
    assert topic_query("Any ideas?") == "Any ideas?"  # nothing left: unchanged


def test_user_side() -> None:
    assert user_side('{"role":"user"}') and user_side("{}") and user_side("not json")
    assert not user_side('{"role":"assistant"}')


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_valid(text: str) -> None:
    assert statement_kind(text) in (None, "preference", "habit", "possession", "constraint")
    assert recommendation_intent(text) in (True, False)
    assert isinstance(topic_query(text), str)


DISTRACTORS = [
    "Thanks for the recommendation, I will check that course out!",
    "I'd recommend taking a course before you start.",
    "The editing on that video was great, what a course of events.",
    "We had a meeting about the budget for the new video.",
    "That course sounds like a lot of work.",
    "Did you see the news about the recommendation engine?",
]


def test_a_planted_preference_is_found_for_a_recommendation_question(
    mem_static: mindfile.Mindfile,
) -> None:
    events = [
        ("s", i, {"role": "assistant" if i % 2 else "user", "content": t})
        for i, t in enumerate(DISTRACTORS, start=1)
    ]
    events.append(("s", 99, {"role": "user", "content": "I've been learning Premiere Pro lately"}))
    mem_static.store_many(events, user_id="u")
    question = "Can you recommend a video editing course?"
    off = mem_static.search(question, top_k=3, preferences=False)
    assert all("Premiere" not in h.text for h in off)
    assert all(h.breakdown.preference is None for h in off)
    on = mem_static.search(question, top_k=3)
    assert "Premiere" in on[0].text, [h.text for h in on]
    top = on[0].breakdown
    assert top.preference is not None and top.preference > 0
    assert top.fused == pytest.approx(
        on.weights[0] * top.vector_norm + on.weights[1] * top.fts_norm + top.preference
    )
    # a question without intent is untouched
    plain = mem_static.search("video editing course", top_k=3)
    assert all(h.breakdown.preference is None for h in plain)
    with pytest.raises(InvalidInputError):
        mem_static.search(question, preferences=1)  # type: ignore[arg-type]


def test_the_third_leg_finds_statements_outside_the_candidates_within_the_filter(
    mem_static: mindfile.Mindfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mindfile.retrieve import preferences

    chatter = [
        (
            "a",
            i,
            {"role": "assistant", "content": f"A video editing course, part {i}: editing video"},
        )
        for i in range(1, 40)
    ]
    mem_static.store_many(chatter, user_id="ann")
    mem_static.store("a", 500, {"role": "user", "content": "I've been learning Premiere Pro"})
    mem_static.store("b", 1, {"role": "user", "content": "I love cutting films in Final Cut"})
    question = "Can you recommend a video editing course?"
    # Each leg's 3 best candidates are the assistant's turns: only the third leg (the
    # question's nearest statements of the whole store) brings the user's statement in.
    ann = mem_static.search(question, top_k=5, user_id="ann", candidates=3)
    assert "Premiere" in ann[0].text, [h.text for h in ann]
    assert ann[0].breakdown.fts_rank is None and ann[0].breakdown.vector_rank is None
    assert all("Final Cut" not in h.text for h in ann)  # another user's memory stays out
    monkeypatch.setattr(
        preferences, "DEFAULT_PREFERENCE_CONFIG", preferences.PreferenceConfig(leg=0)
    )
    without = mem_static.search(question, top_k=5, user_id="ann", candidates=3)
    assert all("Premiere" not in h.text for h in without)
    assert len(preferences.store_marks(mem_static.db)) == 2
    assert mem_static.forget("b")
    assert len(preferences.store_marks(mem_static.db)) == 1  # deletions leave the marks


def test_a_long_backlog_of_statements_is_read_in_the_background(
    mem_static: mindfile.Mindfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first recommendation question of a big store must not read every chunk
    inside the search: above INLINE_MAX the statements are read by a thread, and
    meanwhile the statements among the candidates are still boosted."""
    from mindfile.retrieve import preferences

    monkeypatch.setattr(preferences, "INLINE_MAX", 5)
    monkeypatch.setattr(preferences, "_PAGE", 7)
    chatter = [("s", i, {"role": "assistant", "content": f"Noted, item {i}."}) for i in range(40)]
    mem_static.store_many(chatter)
    mem_static.store("u", 1, {"role": "user", "content": "I've been learning Premiere Pro"})
    started = threading.Event()
    release = threading.Event()
    real = preferences._read_after

    def slow(store: Any, marks: Any, *, locked: bool) -> None:
        if not locked:  # the background build: hold it until the search has answered
            started.set()
            release.wait(10)
        real(store, marks, locked=locked)

    monkeypatch.setattr(preferences, "_read_after", slow)
    hits = mem_static.search("Can you recommend a video editing course?", top_k=3)
    assert started.wait(10)  # the build runs in its thread, the search did not wait
    assert preferences.store_marks(mem_static.db, wait=False) is None  # still building
    premiere = [h for h in hits if "Premiere" in h.text]
    assert premiere and premiere[0].breakdown.preference  # boosted from the candidates
    release.set()
    deadline = time.monotonic() + 10
    while (marks := preferences.store_marks(mem_static.db, wait=False)) is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert len(marks) == 1
