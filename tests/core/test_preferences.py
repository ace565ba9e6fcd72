"""Preference recall (issue 14): the statement and intent detectors, and the boost in a
real store (docs/retrieval.md, "Preference recall")."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mindfile
from mindfile.errors import InvalidInputError
from mindfile.retrieve import preferences
from mindfile.retrieve.preferences import (
    recommendation_intent,
    statement_kind,
    topic_query,
    user_side,
)
from mindfile.storage.backend import search_store
from mindfile.storage.db import Database


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


def _plant_premiere(mem: mindfile.Mindfile) -> str:
    """The distractors and user ``u``'s statement "I've been learning Premiere Pro lately"
    in one session; returns the recommendation question it answers."""
    events = [
        ("s", i, {"role": "assistant" if i % 2 else "user", "content": t})
        for i, t in enumerate(DISTRACTORS, start=1)
    ]
    events.append(("s", 99, {"role": "user", "content": "I've been learning Premiere Pro lately"}))
    mem.store_many(events, user_id="u")
    return "Can you recommend a video editing course?"


def test_a_planted_preference_is_found_for_a_recommendation_question(
    mem_static: mindfile.Mindfile,
) -> None:
    question = _plant_premiere(mem_static)
    off = mem_static.search(question, top_k=3, preferences=False)
    assert all("Premiere" not in h.text for h in off)
    assert all(h.breakdown.preference is None for h in off)
    on = mem_static.search(question, top_k=3)
    assert "Premiere" in on[0].text, [h.text for h in on]
    top = on[0].breakdown
    assert top.preference is not None and top.preference > 0
    assert top.fused == pytest.approx(
        on.weights[0] * top.vector_norm
        + on.weights[1] * top.fts_norm
        + top.preference
        + (top.neighbors or 0.0)
    )
    # a question without intent is untouched
    plain = mem_static.search("video editing course", top_k=3)
    assert all(h.breakdown.preference is None for h in plain)
    with pytest.raises(InvalidInputError):
        mem_static.search(question, preferences=1)  # type: ignore[arg-type]


def test_build_context_ranks_a_recommendation_question_as_search_does(
    mem_static: mindfile.Mindfile,
) -> None:
    question = _plant_premiere(mem_static)

    def memories(**config: object) -> list[str]:
        ctx = mem_static.build_context(
            "asking",
            question,
            token_budget=2000,
            user_id="u",
            config=mindfile.ContextConfig(max_memories=3, **config),  # type: ignore[arg-type]
        )
        return [i.text for i in ctx.items if i.source == "memory"]

    on = memories()
    assert any("Premiere" in t for t in on), on
    off = memories(preferences=False)
    assert off and all("Premiere" not in t for t in off), off
    assert memories(hybrid=False) == memories(hybrid=False, preferences=False)
    with pytest.raises(mindfile.ConfigError):
        mindfile.ContextConfig(preferences="yes")  # type: ignore[arg-type]


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
    marks = preferences.store_marks(mem_static.db)
    assert len(marks) == 2
    # The third leg's sorted rowids are made once while the marks stay the same set.
    arr = preferences.sorted_marks(mem_static.db, marks)
    assert arr.tolist() == sorted(marks)
    assert preferences.store_marks(mem_static.db) is marks
    assert preferences.sorted_marks(mem_static.db, marks) is arr
    assert mem_static.forget("b")
    after = preferences.store_marks(mem_static.db)
    assert len(after) == 1  # deletions leave the marks
    assert preferences.sorted_marks(mem_static.db, after).tolist() == sorted(after)


def _flags(mem: mindfile.Mindfile) -> dict[str, int | None]:
    rows = mem.db.query("SELECT chunk_text, user_statement FROM chunks ORDER BY id")
    return {str(t): None if f is None else int(f) for t, f in rows}


def test_chunks_are_classified_off_the_write_path(any_mem: mindfile.Mindfile) -> None:
    """Migration 0014: ``store`` classifies its event's chunks (~0.1 ms); a bulk
    ``store_many`` and the other writers leave them unclassified (classifying cost ~14%
    of ingest throughput) for the backfill; a search meanwhile classifies a few
    unclassified chunks itself, in memory."""
    mem = any_mem
    mem.store("s", 1, {"role": "user", "content": "I've been learning Premiere Pro"})
    mem.store("s", 2, {"role": "assistant", "content": "I've been learning Final Cut"})
    mem.store("s", 3, {"role": "user", "content": "The weather was nice today."})
    mem.store_many([("t", 1, {"role": "user", "content": "I'm vegetarian"})])
    mem.store_note("s", "n1", "I have a golden retriever")  # no role: user side
    assert _flags(mem) == {
        "I've been learning Premiere Pro": 1,
        "I've been learning Final Cut": 0,
        "The weather was nice today.": 0,
        "I'm vegetarian": None,
        "I have a golden retriever": None,
    }
    store = search_store(mem.db)
    preferences._state(mem.db).lock.acquire()  # no backfill thread for the moment
    try:
        inline = preferences.store_marks(mem.db, wait=False)
        assert len(store.statement_rowids()) == 1 and store.has_unclassified()
    finally:
        preferences._state(mem.db).lock.release()
    assert preferences.backfill(mem.db) == 2
    assert _flags(mem) == {
        "I've been learning Premiere Pro": 1,
        "I've been learning Final Cut": 0,
        "The weather was nice today.": 0,
        "I'm vegetarian": 1,
        "I have a golden retriever": 1,
    }
    assert not store.has_unclassified()
    assert inline == frozenset(store.statement_rowids())
    assert preferences.store_marks(mem.db, wait=False) == inline and len(inline) == 3


def test_deleted_chunks_leave_the_statements(any_mem: mindfile.Mindfile) -> None:
    mem = any_mem
    mem.store("a", 1, {"role": "user", "content": "I love hiking in the Alps"})
    mem.store("b", 1, {"role": "user", "content": "I own a 2012 Prius"})
    mem.store_note("a", "n1", "I'm allergic to peanuts")
    assert len(preferences.store_marks(mem.db)) == 3
    assert mem.forget("b")
    assert mem.delete_note("a", "n1")
    marks = preferences.store_marks(mem.db)
    assert [t for t, f in _flags(mem).items() if f] == ["I love hiking in the Alps"]
    assert marks == frozenset(search_store(mem.db).statement_rowids()) and len(marks) == 1


def test_the_statements_are_caught_up_not_reread(tmp_path: Path) -> None:
    """Kept per open store: new statements come in by rowid, deletions from the change
    log; a log pruned past what was applied makes the next call read the set again."""
    from mindfile.storage import changes

    with mindfile.open(tmp_path / "s.db", embedder="hash") as mem:
        mem.store("a", 1, {"role": "user", "content": "I love hiking in the Alps"})
        mem.store("b", 1, {"role": "user", "content": "I own a 2012 Prius"})
        first = preferences.store_marks(mem.db)
        assert preferences.store_marks(mem.db) is first  # nothing changed: the same set
        mem.store("c", 1, {"role": "user", "content": "I'm vegetarian"})
        mem.store("c", 2, {"role": "user", "content": "Noted."})
        assert len(preferences.store_marks(mem.db)) == 3
        assert mem.forget("a")
        assert len(preferences.store_marks(mem.db)) == 2
        assert mem.forget("b")
        with mem.db.atomic():
            changes.prune(mem.db, keep=0)  # the deletion of "b" is no longer in the log
            mem.db.execute("DELETE FROM chunks_changes")
        mem.store("d", 1, {"role": "user", "content": "I have a golden retriever"})
        marks = preferences.store_marks(mem.db)
        assert marks == frozenset(search_store(mem.db).statement_rowids())
        texts = {t for t, f in _flags(mem).items() if f}
        assert len(marks) == 2 and texts == {"I'm vegetarian", "I have a golden retriever"}


def _chat(n: int) -> list[tuple[str, int, dict[str, str]]]:
    said = [
        "I've been learning Premiere Pro",
        "I love cutting films in Final Cut",
        "I'm vegetarian",
        "I have a golden retriever",
    ]
    events = []
    for i in range(n):
        if i % 10 == 3:
            events.append(("s", i, {"role": "user", "content": f"{said[i % 4]} (note {i})"}))
        else:
            role = "assistant" if i % 2 else "user"
            events.append(("s", i, {"role": role, "content": f"A video editing course, part {i}"}))
    return events


def _downgrade(path: Path) -> None:
    """Make ``path`` a store from before migration 0014: no column, no record."""
    con = Database(path)
    try:
        with con.atomic():
            con.execute("DROP INDEX idx_chunks_user_statement")
            con.execute("DROP INDEX idx_chunks_unclassified")
            con.execute("ALTER TABLE chunks DROP COLUMN user_statement")
            con.execute("DELETE FROM memory_migrations WHERE version = 14")
    finally:
        con.close()


def _results(mem: mindfile.Mindfile, question: str) -> list[tuple[str, float, float | None]]:
    hits = mem.search(question, top_k=10)
    pref = [h.breakdown.preference for h in hits]
    return [
        (h.text, round(h.score, 9), None if p is None else round(p, 9))
        for h, p in zip(hits, pref, strict=True)
    ]


QUESTION = "Can you recommend a video editing course?"


def _backfilled(mem: mindfile.Mindfile) -> frozenset[int]:
    deadline = time.monotonic() + 20
    while search_store(mem.db).has_unclassified():
        preferences.store_marks(mem.db, wait=False)  # (re)starts the backfill
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return preferences.store_marks(mem.db, wait=False)  # type: ignore[return-value]


def test_a_store_from_before_the_migration_is_backfilled_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks written before migration 0014 (or by a bulk ingest) are classified once,
    by a background thread the first recommendation question starts; meanwhile searches
    boost the statements among their own candidates, and afterwards they answer as on
    a fresh store."""
    monkeypatch.setattr(preferences, "_PAGE", 7)
    monkeypatch.setattr(preferences, "INLINE_MAX", 0)  # too many to classify in a search
    path = tmp_path / "old.db"
    with mindfile.open(path) as mem:
        mem.store_many(_chat(60))
        expected = preferences.store_marks(mem.db)
        fresh = _results(mem, QUESTION)
    assert len(expected) == 6 and any(p for _, _, p in fresh)
    _downgrade(path)
    started, release = threading.Event(), threading.Event()
    real = preferences._classify_all

    def held(db: Any, **kwargs: Any) -> int:
        started.set()
        release.wait(10)
        return real(db, **kwargs)

    monkeypatch.setattr(preferences, "_classify_all", held)
    with mindfile.open(path) as mem:
        assert set(_flags(mem).values()) == {None}  # migrated: nothing classified yet
        during = mem.search(QUESTION, top_k=10)
        assert started.wait(10)  # the backfill runs in its thread; the search did not wait
        assert preferences.store_marks(mem.db, wait=False) == frozenset()  # none known yet
        assert during[0].breakdown.preference  # a statement among the candidates, boosted
        release.set()
        assert _backfilled(mem) == expected
        assert None not in _flags(mem).values()
        assert _results(mem, QUESTION) == fresh
    with mindfile.open(path) as mem:  # persisted: the next engine has nothing to do
        assert not search_store(mem.db).has_unclassified()
        assert preferences.backfill(mem.db) == 0


def test_unclassified_chunks_are_backfilled_on_both_backends(
    any_mem: mindfile.Mindfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(preferences, "INLINE_MAX", 0)
    mem = any_mem
    mem.store_many(_chat(40))
    expected = preferences.store_marks(mem.db)
    assert len(expected) == 4
    with mem.db.atomic():  # as if written before the migration
        mem.db.execute("UPDATE chunks SET user_statement = NULL WHERE id % 2 = 0")
    known = preferences.store_marks(mem.db, wait=False)  # the backfill starts
    assert known is not None and known <= expected
    assert _backfilled(mem) == expected and None not in _flags(mem).values()


def _unclassified(mem: mindfile.Mindfile) -> int:
    """A short chat stored, its chunks' flags cleared as if written before migration
    0014: how many chunks (more than two pages of 7)."""
    mem.store_many(_chat(20))
    with mem.db.atomic():
        mem.db.execute("UPDATE chunks SET user_statement = NULL")
    total = len(_flags(mem))
    assert total > 14
    return total


def test_the_backfill_goes_a_page_at_a_time_when_asked(
    mem_static: mindfile.Mindfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``backfill(pages=1)``: what the bulk ingest's publisher does between two BM25
    publishes (mindfile._publish) classifies one page, the next call the next one."""
    monkeypatch.setattr(preferences, "_PAGE", 7)
    mem = mem_static
    total = _unclassified(mem)
    assert preferences.backfill(mem.db, pause=0.0, pages=1) == 7
    assert list(_flags(mem).values()).count(None) == total - 7
    assert preferences.backfill(mem.db, pause=0.0, pages=1) == 7
    assert preferences.backfill(mem.db, pause=0.0) == total - 14
    assert None not in _flags(mem).values()


def test_while_a_helper_classifies_this_process_starts_no_backfill(
    mem_static: mindfile.Mindfile,
) -> None:
    """``defer_to``: while the bulk ingest's publisher classifies the store, neither a
    recommendation search nor the idle follower starts a backfill here (it took the
    interpreter from the searches for seconds); once the helper is gone, they do."""
    mem = mem_static
    mem.store_many(_chat(40))
    assert search_store(mem.db).has_unclassified()
    helper = [True]
    preferences.defer_to(mem.db, lambda: helper[0])
    assert preferences.deferred(mem.db)
    mem.search("Can you recommend a video editing course?")
    preferences.store_marks(mem.db, wait=False)
    mem._follow_indexes()
    time.sleep(0.2)
    assert search_store(mem.db).has_unclassified()
    assert not preferences._state(mem.db).lock.locked()  # no backfill thread either
    helper[0] = False
    assert not preferences.deferred(mem.db)
    mem._follow_indexes()  # the follower classifies now (in its thread: here, inline)
    assert not search_store(mem.db).has_unclassified()


def test_a_background_backfill_hands_over_to_a_helper_that_comes_up(
    mem_static: mindfile.Mindfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backfill thread stops between two pages once a bulk ingest's helper
    classifies; ``backfill()`` itself (what the helper runs) does not."""
    monkeypatch.setattr(preferences, "_PAGE", 7)
    mem = mem_static
    total = _unclassified(mem)
    checks = [False]  # the helper is up from the second check on
    preferences.defer_to(mem.db, lambda: checks.pop(0) if checks else True)
    preferences._run_backfill(mem.db)
    assert list(_flags(mem).values()).count(None) == total - 7  # one page, then handed over
    assert preferences.backfill(mem.db, pause=0.0) == total - 7
    assert None not in _flags(mem).values()


def test_two_engines_backfilling_one_store_at_once_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes may backfill the same store at once: each writes only rows still
    unclassified, so the result is the same as one backfill's."""
    monkeypatch.setattr(preferences, "_PAGE", 5)
    path = tmp_path / "old.db"
    with mindfile.open(path, embedder="hash") as mem:
        mem.store_many(_chat(80))
        expected = preferences.store_marks(mem.db)
    _downgrade(path)
    with mindfile.open(path, embedder="hash") as one, mindfile.open(path, embedder="hash") as two:
        done: list[int] = []
        errors: list[BaseException] = []

        def run(mem: mindfile.Mindfile) -> None:
            try:
                done.append(preferences.backfill(mem.db, pause=0.0))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(m,)) for m in (one, two)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors and len(done) == 2
        assert sum(done) >= 80  # every chunk classified (some maybe by both)
        assert preferences.store_marks(one.db) == preferences.store_marks(two.db) == expected


def test_a_read_only_engine_does_not_backfill(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with mindfile.open(path, embedder="hash") as mem:
        mem.store_many(_chat(30))
        expected = preferences.store_marks(mem.db)
    _downgrade(path)
    with mindfile.open(path, embedder="hash"):
        pass  # the migration (read-only engines need the schema current)
    with mindfile.open(path, embedder="hash", read_only=True) as mem:
        # 30 unclassified chunks: classified in memory for each answer; no thread, no write
        assert preferences.store_marks(mem.db, wait=False) == expected
        assert mem.search(QUESTION, top_k=3)
        assert search_store(mem.db).has_unclassified()
        assert preferences.store_marks(mem.db) == expected
        assert search_store(mem.db).has_unclassified()


def test_searching_storing_and_backfilling_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recommendation searches in several threads while the backfill runs and another
    thread stores, with thread switches at nearly every bytecode: no error, and the final
    set of statements is exactly the classified chunks."""
    monkeypatch.setattr(preferences, "_PAGE", 4)
    path = tmp_path / "old.db"
    with mindfile.open(path, embedder="hash") as mem:
        mem.store_many(_chat(120))
    _downgrade(path)
    errors: list[BaseException] = []
    old = sys.getswitchinterval()
    with mindfile.open(path, embedder="hash") as mem:
        stop = threading.Event()

        def search() -> None:
            try:
                while not stop.is_set():
                    mem.search(QUESTION, top_k=5)
            except BaseException as exc:
                errors.append(exc)

        def store() -> None:
            try:
                for i in range(40):
                    text = "I usually cook on Sundays" if i % 3 == 0 else f"Noted, item {i}."
                    mem.store("w", i, {"role": "user", "content": f"{text} #{i}"})
            except BaseException as exc:
                errors.append(exc)

        sys.setswitchinterval(1e-6)
        try:
            threads = [threading.Thread(target=search) for _ in range(3)]
            writer = threading.Thread(target=store)
            for t in [*threads, writer]:
                t.start()
            writer.join(120)
            _backfilled(mem)
            stop.set()
            for t in threads:
                t.join(60)
        finally:
            stop.set()
            sys.setswitchinterval(old)
        assert not errors, errors
        store_ = search_store(mem.db)
        everything = store_.chunk_statements(
            [int(r[0]) for r in mem.db.query("SELECT id FROM chunks")]
        )
        assert len(everything) == 160
        want = preferences.marked(everything)
        assert preferences.store_marks(mem.db) == want and len(want) == 12 + 14


def test_a_newer_lexicon_reclassifies_the_store_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Flags made by an older lexicon (store_meta statement_lexicon) are cleared and
    classified again by the backfill; the version is recorded, so only once."""
    from mindfile.index import statements

    path = tmp_path / "store.db"
    with mindfile.open(path, embedder="hash") as mem:
        mem.store_many(_chat(30))
        expected = preferences.store_marks(mem.db)
        # What an older lexicon might have said: one statement missed, one extra.
        first, other = min(expected), min(set(range(1, 31)) - expected)
        with mem.db.atomic():
            mem.db.execute("UPDATE chunks SET user_statement = 0 WHERE id = ?", (first,))
            mem.db.execute("UPDATE chunks SET user_statement = 1 WHERE id = ?", (other,))
    with mindfile.open(path, embedder="hash") as mem:
        wrong = preferences.store_marks(mem.db)
        assert wrong == (expected - {first}) | {other}
    monkeypatch.setattr(statements, "LEXICON_VERSION", 2)
    with mindfile.open(path, embedder="hash") as mem:
        assert search_store(mem.db).statement_lexicon() == 1  # absent: the first lexicon
        assert preferences.store_marks(mem.db, wait=False) is None  # reclassifying
        deadline = time.monotonic() + 10
        while (marks := preferences.store_marks(mem.db, wait=False)) is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert marks == expected
        assert search_store(mem.db).statement_lexicon() == 2
    with mindfile.open(path, embedder="hash") as mem:
        assert preferences.store_marks(mem.db, wait=False) == expected  # nothing to redo
        assert not search_store(mem.db).reset_statements(2)


def test_chunks_classified_while_the_marks_are_read_are_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search reads the statements classified so far, then classifies the unclassified
    tail itself. When the backfill (another thread or process) classifies that tail in
    between, its statements must be in one of the two reads: they were in neither, and
    a store whose chunks were all statements answered with none (found as a rare
    failure of test_a_newer_lexicon_reclassifies_the_store_once under load)."""
    path = tmp_path / "store.db"
    with mindfile.open(path, embedder="hash") as mem:
        mem.store_many(_chat(30))
        expected = preferences.store_marks(mem.db)
        assert expected
    with mindfile.open(path, embedder="hash") as mem:
        mem.db.execute("UPDATE chunks SET user_statement = NULL")  # as after a new lexicon
        real = preferences._caught_up
        done: list[int] = []

        def backfill_right_after(*args: Any, **kwargs: Any) -> frozenset[int]:
            known = real(*args, **kwargs)
            if not done:  # the backfill finishes just after the classified set was read
                done.append(preferences.backfill(mem.db, pause=0.0))
            return known

        monkeypatch.setattr(preferences, "_caught_up", backfill_right_after)
        monkeypatch.setattr(preferences, "_start_backfill", lambda db: None)
        assert preferences.store_marks(mem.db, wait=False) == expected
        assert done == [30]
