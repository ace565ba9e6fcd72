"""The rolling summarizer: trigger rules, condensation, CAS retries, pluggable parts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

import mindfile
from mindfile.errors import ConfigError, InvalidInputError
from mindfile.memory import (
    SECTION_HEADING,
    SUMMARY_PREFIX,
    SummaryConfig,
    SummaryState,
    extractive_condenser,
)
from mindfile.tokens import estimate_tokens, message_tokens
from mindfile.types import MemoryRecord


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


S = "chat"


def add_turns(mem: mindfile.Mindfile, start: int, count: int, words: int = 30) -> None:
    for i in range(start, start + count):
        role = "user" if i % 2 else "assistant"
        body = f"Turn {i} talks about topic {i}. " + "filler " * words
        mem.store(S, i, {"role": role, "content": body})


def cost(mem: mindfile.Mindfile, upper: int = -1) -> int:
    return sum(message_tokens(r.payload) for r in mem.recall(S) if r.sequence > upper)


def test_no_summary_below_min_turns_even_when_over_budget(mem: mindfile.Mindfile) -> None:
    add_turns(mem, 1, 3, words=200)
    ctx = mem.summarize(S, 100)
    assert ctx.condensed == 0 and ctx.summary is None
    assert len(ctx.messages) == 3 and ctx.tokens == cost(mem) > 100
    assert mem.read_summary_state(S) is None


def test_no_summary_at_or_below_the_trigger_ratio(mem: mindfile.Mindfile) -> None:
    add_turns(mem, 1, 6)
    budget = int(cost(mem) / 0.80)  # utilization == 0.80 exactly is not "above"
    while cost(mem) > 0.80 * budget:
        budget += 1
    ctx = mem.summarize(S, budget)
    assert ctx.condensed == 0 and mem.read_summary_state(S) is None
    assert [m["content"][:6] for m in ctx.messages] == [f"Turn {i}" for i in range(1, 7)]


def test_condenses_the_oldest_turns_down_to_the_target(mem: mindfile.Mindfile) -> None:
    add_turns(mem, 1, 10)
    budget = int(cost(mem) / 0.9)  # 90% utilization: over the 80% trigger
    ctx = mem.summarize(S, budget)
    assert ctx.condensed > 0
    state = mem.read_summary_state(S)
    assert state is not None and state.epoch == 1 == ctx.epoch
    assert state.upper_sequence == ctx.condensed  # events 1..k were folded
    assert state.summary == ctx.summary and state.summary.startswith(SECTION_HEADING)
    bullets = state.summary.splitlines()[1:]
    assert bullets == [
        f"- {'user' if i % 2 else 'assistant'}: Turn {i} talks about topic {i}."
        for i in range(1, ctx.condensed + 1)
    ]
    # The context: the summary as a system message, then the uncovered messages in order.
    first, *rest = ctx.messages
    assert first == {"role": "system", "content": SUMMARY_PREFIX + state.summary}
    assert [m["content"].split(".")[0] for m in rest] == [
        f"Turn {i} talks about topic {i}" for i in range(ctx.condensed + 1, 11)
    ]
    # The context (grown summary included) is at the target; it was not over-folded.
    assert ctx.tokens == message_tokens(first) + cost(mem, state.upper_sequence)
    assert ctx.tokens <= 0.5 * budget
    assert cost(mem, state.upper_sequence - 2) > 0.5 * budget


def test_a_second_call_does_not_resummarize_and_new_turns_append(mem: mindfile.Mindfile) -> None:
    add_turns(mem, 1, 10)
    budget = int(cost(mem) / 0.9)
    first = mem.summarize(S, budget)
    again = mem.summarize(S, budget)
    assert again.condensed == 0 and again.summary == first.summary and again.epoch == 1
    assert again.messages == first.messages
    add_turns(mem, 11, 10)
    third = mem.summarize(S, budget)
    assert third.condensed > 0 and third.epoch == 2
    assert third.summary is not None and first.summary is not None
    assert third.summary.startswith(first.summary)  # appended, never rewritten
    assert third.summary.count(SECTION_HEADING) == 2
    assert f"Turn {first.upper_sequence + 1} talks" in third.summary


def test_keep_recent_never_folds_the_newest_message(mem: mindfile.Mindfile) -> None:
    add_turns(mem, 1, 4, words=10)
    mem.store(S, 5, {"role": "user", "content": "huge " * 2000})
    ctx = mem.summarize(S, 200)
    assert ctx.condensed == 4 and ctx.upper_sequence == 4
    assert ctx.messages[-1]["content"].startswith("huge")
    cfg = SummaryConfig(keep_recent=3)
    mem.store(S, 6, "x " * 2000)
    mem.store(S, 7, "y " * 2000)
    mem.store(S, 8, "z " * 2000)
    ctx = mem.summarize(S, 200, config=cfg)
    assert ctx.upper_sequence == 5 and len(ctx.messages) == 4  # summary + 3 kept


def test_pluggable_condenser_and_token_counter(mem: mindfile.Mindfile) -> None:
    add_turns(mem, 1, 8)
    seen: list[list[int]] = []
    counted: list[str] = []

    def condenser(records: Sequence[MemoryRecord]) -> str:
        seen.append([r.sequence for r in records])
        return f"- {len(records)} turns about assorted topics"

    def words(text: str) -> int:
        counted.append(text)
        return len(text.split())

    total = sum(message_tokens(r.payload, words) for r in mem.recall(S))
    ctx = mem.summarize(S, int(total / 0.9), condenser=condenser, token_counter=words)
    assert counted  # the custom counter was used
    assert [seq for batch in seen for seq in batch] == list(range(1, ctx.condensed + 1))
    lines = [f"- {len(batch)} turns about assorted topics" for batch in seen]
    assert ctx.summary == "\n".join([SECTION_HEADING, *lines])


def test_a_failing_condenser_writes_nothing(mem: mindfile.Mindfile) -> None:
    add_turns(mem, 1, 8)

    def broken(records: Sequence[MemoryRecord]) -> str:
        raise RuntimeError("LLM unavailable")

    with pytest.raises(RuntimeError):
        mem.summarize(S, 100, condenser=broken)
    assert mem.read_summary_state(S) is None


@pytest.mark.parametrize("other_upper", [1, 4])
def test_a_concurrent_summary_wins_and_is_built_upon(db_path: Path, other_upper: int) -> None:
    with mindfile.open(db_path, embedder="hash") as mem, mindfile.open(db_path) as other:
        add_turns(mem, 1, 10)
        calls = 0

        def condenser(records: Sequence[MemoryRecord]) -> str:
            nonlocal calls
            calls += 1
            if calls == 1:  # another process summarizes first: our write must lose
                other.write_summary_state(S, SummaryState("OTHER SUMMARY", other_upper), 0)
            return extractive_condenser(records)

        ctx = mem.summarize(S, int(cost(mem) / 0.9), condenser=condenser)
        state = mem.read_summary_state(S)
        assert state is not None and state.summary.startswith("OTHER SUMMARY")
        assert f"Turn {other_upper} talks" not in state.summary  # never summarized twice
        if other_upper == 1:  # still over the trigger: a second pass builds on it
            assert calls >= 2 and ctx.condensed > 0 and state.epoch == 2 == ctx.epoch
            assert state.summary.startswith("OTHER SUMMARY\n\n" + SECTION_HEADING)
            assert "Turn 2 talks" in state.summary
        else:  # the winner already brought it under the trigger: serve its state
            assert ctx.condensed == 0 and state.epoch == 1 == ctx.epoch
            assert state.summary == "OTHER SUMMARY" == ctx.summary
            assert ctx.upper_sequence == 4 and len(ctx.messages) == 1 + 6


def test_extractive_condenser() -> None:
    records = [
        MemoryRecord(S, 1, {"role": "user", "content": "Where is it? I lost my keys."}, ""),
        MemoryRecord(S, 2, {"role": "assistant", "content": "   "}, ""),
        MemoryRecord(S, 3, "plain string event without any sentence end " * 10, ""),
        MemoryRecord(S, 4, {"role": "tool", "content": [{"type": "text", "text": "ok."}]}, ""),
    ]
    lines = extractive_condenser(records).splitlines()
    assert lines[0] == "- user: Where is it?"
    assert lines[1].startswith("- event: plain string event") and lines[1].endswith("…")
    assert len(lines[1]) <= len("- event: ") + 160
    assert lines[2] == "- tool: ok."
    assert len(lines) == 3


def test_default_token_counter_is_the_documented_estimate() -> None:
    assert estimate_tokens("abcd" * 10) == 10
    assert message_tokens({"role": "user", "content": "abcd"}) == 1 + 4


def test_bad_arguments(mem: mindfile.Mindfile) -> None:
    for budget in (0, -5, 1.5, True):
        with pytest.raises(InvalidInputError):
            mem.summarize(S, budget)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        SummaryConfig(trigger_ratio=0.5, target_ratio=0.6)
    with pytest.raises(ConfigError):
        SummaryConfig(min_turns=0)


def test_an_empty_session_gives_an_empty_context(mem: mindfile.Mindfile) -> None:
    ctx = mem.summarize("nobody", 1000)
    assert ctx.messages == () and ctx.tokens == 0 and ctx.summary is None
    assert ctx.to_dict()["messages"] == []


# -- a summary never makes the context bigger ---------------------------------------------

SHORT = [
    "Can you help me plan a Lisbon trip?",
    "Sure, when would you like to travel?",
    "In May, for a week or so.",
    "May is a lovely time to visit Lisbon.",
    "Great, let us start with the flights.",
]


def add_short(mem: mindfile.Mindfile) -> None:
    for i, text in enumerate(SHORT, start=1):
        mem.store(S, i, {"role": "user" if i % 2 else "assistant", "content": text})


def test_a_summary_that_would_not_shrink_the_context_is_not_written(
    mem: mindfile.Mindfile,
) -> None:
    # Five one-sentence messages (65 tokens) against a 40-token target: the extractive
    # lines are the messages themselves plus framing, so condensing four of them would
    # grow the context. Nothing is stored and the result says so.
    add_short(mem)
    assert cost(mem) == 65
    ctx = mem.summarize(S, 80)
    assert ctx.condensed == 0 and ctx.outcome == "not_smaller"
    assert ctx.summary is None and ctx.epoch == 0 and ctx.upper_sequence == -1
    assert mem.read_summary_state(S) is None
    assert ctx.tokens == 65 and [m["content"] for m in ctx.messages] == SHORT
    assert ctx.to_dict()["outcome"] == "not_smaller"
    # Asking again changes nothing either.
    assert mem.summarize(S, 80).outcome == "not_smaller"
    assert mem.read_summary_state(S) is None


def test_a_summary_that_would_not_shrink_an_existing_summary_is_not_written(
    mem: mindfile.Mindfile,
) -> None:
    add_short(mem)
    mem.write_summary_state(S, SummaryState("Planning a trip.", 0), 0)
    ctx = mem.summarize(S, 80)
    assert ctx.condensed == 0 and ctx.outcome == "not_smaller"
    state = mem.read_summary_state(S)
    assert state is not None and state.epoch == 1 and state.summary == "Planning a trip."


def test_a_written_summary_always_shrinks_what_it_replaces(mem: mindfile.Mindfile) -> None:
    add_turns(mem, 1, 10)
    before = cost(mem)
    ctx = mem.summarize(S, int(before / 0.9))
    assert ctx.outcome == "condensed" and ctx.condensed > 0
    assert ctx.tokens < before
    folded = sum(message_tokens(r.payload) for r in mem.recall(S)[: ctx.condensed])
    assert message_tokens(ctx.messages[0]) < folded


def test_the_outcome_names_why_nothing_was_condensed(mem: mindfile.Mindfile) -> None:
    assert mem.summarize(S, 100).outcome == "within_budget"
    add_turns(mem, 1, 6)
    assert mem.summarize(S, 10_000).outcome == "within_budget"
    ctx = mem.summarize(S, 50, config=SummaryConfig(keep_recent=6))
    assert ctx.condensed == 0 and ctx.outcome == "nothing_to_fold"
