"""The budget policy: reservations, the memory share and its flows, and never over budget."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from backends import raw
from hypothesis import given, settings
from hypothesis import strategies as st

import mindfile
from mindfile.context import Context, ContextConfig
from mindfile.errors import LimitExceededError
from mindfile.memory import SummaryState
from mindfile.tokens import estimate_tokens, message_tokens

from ._support import assistant, user


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


def seed_config(**fields: object) -> ContextConfig:
    """The seed's legs (thresholded cosine relevance, salience, BM25 top 5) and its cap of
    8 memories: what these tests pin down. The default adds the hybrid leg and lets the
    budget decide how many memories (tests/context/test_hybrid.py)."""
    return ContextConfig(**{"hybrid": False, "max_memories": 8, **fields})  # type: ignore[arg-type]


EVERYTHING = seed_config(relevance_threshold=-1.0, near_duplicate=1.0)


def words(text: str) -> int:
    return len(text.split())


def memory_tokens(ctx: Context) -> int:
    return sum(i.tokens for i in ctx.items if i.source in ("memory", "salient"))


def turn_tokens(ctx: Context) -> int:
    return sum(i.tokens for i in ctx.items if i.source == "recent")


def seed(mem: mindfile.Mindfile, *, turns: int, memories: int, size: int = 200) -> None:
    mem.store_many(
        [("old", i, user(f"memory {i} " + "m" * size)) for i in range(1, memories + 1)],
        agent_identity="bot",
    )
    mem.store_many(
        [("chat", i, user(f"turn {i} " + "t" * size)) for i in range(1, turns + 1)],
        agent_identity="bot",
    )


def test_memories_stay_within_their_share_when_turns_want_the_rest(mem: mindfile.Mindfile) -> None:
    seed(mem, turns=10, memories=6)
    ctx = mem.build_context("chat", "q", token_budget=400, config=EVERYTHING)
    assert 0 < memory_tokens(ctx) <= 0.4 * 400
    assert turn_tokens(ctx) > 0.6 * 400 - 60  # the rest, up to one turn's worth
    assert ctx.tokens <= 400


def test_what_turns_leave_flows_to_memories(mem: mindfile.Mindfile) -> None:
    seed(mem, turns=1, memories=6)
    ctx = mem.build_context("chat", "q", token_budget=400, config=EVERYTHING)
    assert memory_tokens(ctx) > 0.4 * 400  # over the share: the turns did not need it
    assert turn_tokens(ctx) > 0
    assert ctx.tokens <= 400
    skipped = [d for d in ctx.dropped if d.source == "memory"]
    assert skipped and all(d.reason.startswith("over budget") for d in skipped)


def test_what_memories_leave_flows_to_turns(mem: mindfile.Mindfile) -> None:
    seed(mem, turns=10, memories=0)
    ctx = mem.build_context("chat", "q", token_budget=400, config=EVERYTHING)
    assert memory_tokens(ctx) == 0
    assert turn_tokens(ctx) > 0.6 * 400
    share = seed_config(relevance_threshold=-1.0, memory_share=0.0)
    seed(mem, turns=0, memories=3)
    ctx = mem.build_context("chat", "q", token_budget=400, config=share)
    assert turn_tokens(ctx) > 0.8 * 400  # share 0: memories only get the leftover


def test_turns_stay_a_contiguous_tail(mem: mindfile.Mindfile) -> None:
    mem.store_many(
        [
            ("chat", 1, user("short one")),
            ("chat", 2, user("huge " + "x" * 2000)),
            ("chat", 3, user("short three")),
        ]
    )
    ctx = mem.build_context("chat", "q", token_budget=100)
    assert [m["content"] for m in ctx.messages] == ["short three"]
    reasons = {d.sequence: d.reason for d in ctx.dropped}
    assert reasons[2].startswith("over budget: needs 506 tokens")
    assert reasons[1] == "older than a turn that did not fit (turns stay contiguous)"


def test_a_tool_result_without_its_call_is_dropped(mem: mindfile.Mindfile) -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    result = {"role": "tool", "tool_call_id": "c1", "content": "42"}
    mem.store_many(
        [
            ("chat", 1, user("ask")),
            ("chat", 2, call),
            ("chat", 3, result),
            ("chat", 4, assistant("It is 42.")),
        ]
    )
    ctx = mem.build_context("chat", "q", token_budget=1000)
    assert [m["role"] for m in ctx.messages] == ["user", "assistant", "tool", "assistant"]
    ctx = mem.build_context("chat", "q", token_budget=1000, config=seed_config(recent_turns=2))
    assert ctx.messages == (assistant("It is 42."),)
    assert [d.reason for d in ctx.dropped] == [
        "tool result whose assistant tool call is not in the context"
    ]
    assert ctx.tokens == message_tokens(assistant("It is 42."))


def test_reservations_for_system_prompt_and_tools(mem: mindfile.Mindfile) -> None:
    seed(mem, turns=3, memories=0, size=10)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    prompt = "You are a careful assistant."
    ctx = mem.build_context("chat", "q", token_budget=300, system_prompt=prompt, tools=tools)
    expected = message_tokens({"role": "system", "content": prompt}) + estimate_tokens(
        json.dumps(tools)
    )
    assert ctx.reserved == expected
    assert ctx.messages[0] == {"role": "system", "content": prompt}
    assert ctx.tokens == expected + turn_tokens(ctx)
    # An explicit reservation wins when larger; the counted one when it is.
    ctx = mem.build_context("chat", "q", token_budget=300, reserve_system=100, reserve_tools=50)
    assert ctx.reserved == 150 and ctx.messages[0]["role"] == "user"
    ctx = mem.build_context("chat", "q", token_budget=300, system_prompt=prompt, reserve_system=1)
    assert ctx.reserved == message_tokens({"role": "system", "content": prompt})
    with pytest.raises(LimitExceededError) as info:
        mem.build_context("chat", "q", token_budget=50, reserve_system=40, reserve_tools=11)
    assert info.value.details == {"reserved": 51, "token_budget": 50}
    ctx = mem.build_context("chat", "q", token_budget=50, reserve_system=50)
    assert ctx.tokens == 50 and ctx.messages == ()


def test_a_summary_that_does_not_fit_is_dropped(mem: mindfile.Mindfile) -> None:
    seed(mem, turns=3, memories=0, size=10)
    mem.write_summary_state("chat", SummaryState("s" * 4000, 0), 0)
    ctx = mem.build_context("chat", "q", token_budget=300)
    assert [i.source for i in ctx.items] == ["recent"] * 3
    assert ctx.dropped[0].source == "summary"
    assert ctx.dropped[0].reason.startswith("summary needs 1011 tokens, only 300 available")


def test_the_token_counter_is_pluggable(mem: mindfile.Mindfile) -> None:
    mem.store_many([("chat", i, user("one two three four")) for i in range(1, 6)])
    ctx = mem.build_context("chat", "q", token_budget=17, token_counter=words)
    assert len(ctx.messages) == 2 and ctx.tokens == 16  # (4 words + 4 framing) x 2


# -- never over budget ----------------------------------------------------------------------


def scrambled(text: str) -> int:
    """Neither monotone nor additive: the packer must measure what it emits."""
    return (len(text) * 7919) % 13


def superadditive(text: str) -> int:
    """Longer messages cost more than their parts: the packer's bound (a line adds its
    own tokens plus one) fails, and it must fall back to measuring every step."""
    return len(text) ** 2 // 400


COUNTERS: list[Callable[[str], int]] = [estimate_tokens, words, len, scrambled, superadditive]
_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=300)
_payload = st.one_of(
    _text,
    st.builds(user, _text),
    st.builds(assistant, _text),
    st.builds(lambda t: {"role": "tool", "tool_call_id": "c", "content": t}, _text),
    st.builds(lambda t: {"kind": "record", "value": t}, _text),
)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "chat": draw(st.lists(_payload, max_size=20)),
        "other": draw(st.lists(_payload, max_size=12)),
        # A note needs indexable text (notes refuse content that normalises to nothing).
        "notes": draw(st.lists(_text.filter(lambda t: t.replace("\x00", " ").strip()), max_size=4)),
        "summary": draw(st.none() | _text),
        "salient": draw(st.lists(st.integers(0, 30), max_size=4)),
        "budget": draw(st.integers(1, 2500)),
        "reserve_system": draw(st.integers(0, 300)),
        "reserve_tools": draw(st.integers(0, 300)),
        "system_prompt": draw(st.none() | _text),
        "counter": draw(st.sampled_from(COUNTERS)),
        "query": draw(_text),
        "config": seed_config(
            recent_turns=draw(st.integers(0, 25)),
            relevance_threshold=draw(st.floats(-1.0, 1.0)),
            memory_share=draw(st.floats(0.0, 1.0)),
            max_memories=draw(st.integers(0, 10)),
            lexical_k=draw(st.integers(0, 4)),
            near_duplicate=draw(st.floats(-1.0, 1.0)),
        ),
    }


@settings(max_examples=80)
@given(scenarios())
def test_never_over_budget(s: dict[str, Any]) -> None:
    with mindfile.open(":memory:", embedder="hash") as mem:
        if s["chat"]:
            mem.store_many([("chat", i, p) for i, p in enumerate(s["chat"], 1)], agent_identity="a")
        if s["other"]:
            mem.store_many([("old", i, p) for i, p in enumerate(s["other"], 1)], agent_identity="a")
        for i, note in enumerate(s["notes"]):
            mem.store_note("memory:u", f"n{i}", note)
        if s["summary"]:
            mem.write_summary_state("chat", SummaryState(s["summary"], len(s["chat"]) // 2), 0)
        for rowid in s["salient"]:
            raw(mem).execute("UPDATE chunks SET importance = 0.9 WHERE id = ?", (rowid,))
        counter = s["counter"]
        kwargs: dict[str, Any] = {
            "token_budget": s["budget"],
            "user_id": "u",
            "agent_identity": "a",
            "system_prompt": s["system_prompt"],
            "reserve_system": s["reserve_system"],
            "reserve_tools": s["reserve_tools"],
            "config": s["config"],
            "token_counter": counter,
        }
        system_cost = (
            0
            if s["system_prompt"] is None
            else message_tokens({"role": "system", "content": s["system_prompt"]}, counter)
        )
        reserved = max(s["reserve_system"], system_cost) + s["reserve_tools"]
        if reserved > s["budget"]:
            with pytest.raises(LimitExceededError):
                mem.build_context("chat", s["query"], **kwargs)
            return
        ctx = mem.build_context("chat", s["query"], **kwargs)
    assert ctx.reserved == reserved
    assert ctx.tokens <= s["budget"]
    body = ctx.messages[1:] if s["system_prompt"] is not None else ctx.messages
    assert reserved + sum(message_tokens(m, counter) for m in body) == ctx.tokens
    assert sum(i.tokens for i in ctx.items) + reserved == ctx.tokens
    order = {"summary": 0, "salient": 1, "memory": 1, "recent": 2}
    ranks = [order[i.source] for i in ctx.items]
    assert ranks == sorted(ranks)
    turns = [
        m
        for m in body
        if not (
            m["role"] == "system"
            and isinstance(m.get("content"), str)
            and m["content"].startswith(("Rolling", "Relevant"))
        )
    ]
    assert not turns or turns[0]["role"] != "tool"
    json.dumps(ctx.to_dict())
