"""build_context: the three legs, the scope rules, the output shape and the reasons."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import mindfile
from mindfile.context import Context, ContextConfig
from mindfile.errors import InvalidInputError, LimitExceededError
from mindfile.manage.expiry import set_decay_policy
from mindfile.memory import SummaryState
from mindfile.tokens import message_tokens

from ._support import FailingQueryEmbedder, TableEmbedder, assistant, basis, set_chunk, user


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


HIKING = "I love hiking in the Alps."
PEANUTS = "Allergic to peanuts."
BATTERY = "We size home batteries."
Q = basis(1, 0, 0)  # a query pointing at HIKING

TABLE = {
    HIKING: basis(1, 0, 0),
    PEANUTS: basis(0, 1, 0),
    BATTERY: basis(0, 0, 1),
    "sim 0.66": basis(0.66, math.sqrt(1 - 0.66**2)),
    "sim 0.65": basis(0.65, 0, math.sqrt(1 - 0.65**2)),
    "sim 0.80": basis(0.80, 0, 0, 0.6),
    "near copy": basis(0.99, 0, 0, 0, math.sqrt(1 - 0.99**2)),
    "sim 0.80 note": basis(0.80, 0, 0, 0, 0, 0.6),
}


def seed_config(**fields: object) -> ContextConfig:
    """The seed's legs (thresholded cosine relevance, salience, BM25 top 5) and its cap of
    8 memories: what these tests pin down. The default adds the hybrid leg and lets the
    budget decide how many memories (tests/context/test_hybrid.py)."""
    return ContextConfig(**{"hybrid": False, "max_memories": 8, **fields})  # type: ignore[arg-type]


@pytest.fixture
def tmem(tmp_path: Path) -> Iterator[mindfile.Mindfile]:
    with mindfile.open(tmp_path / "ctx.db", embedder=TableEmbedder(TABLE)) as store:
        yield store


def build(mem: mindfile.Mindfile, **kwargs: object) -> Context:
    args: dict[str, object] = {"token_budget": 2000, "query_embedding": Q, "config": seed_config()}
    args.update(kwargs)
    session = args.pop("session", "chat")
    query = args.pop("query", "what do I like?")
    return mem.build_context(session, query, **args)  # type: ignore[arg-type]


def memories(ctx: Context) -> list[str]:
    return [i.text for i in ctx.items if i.source in ("memory", "salient")]


def check_accounting(ctx: Context) -> None:
    """Items' tokens add up to the context's, which is what the messages cost."""
    assert ctx.tokens <= ctx.budget
    assert sum(i.tokens for i in ctx.items) + ctx.reserved == ctx.tokens
    json.dumps(ctx.to_dict())


def test_output_order_shapes_and_reasons(tmem: mindfile.Mindfile) -> None:
    tmem.store("old", 1, user(HIKING), agent_identity="bot", user_id="u1")
    tmem.store_note("memory:u1", "n1", PEANUTS)
    tmem.store_many(
        [("chat", i, user(f"turn {i}")) for i in (1, 2, 3)], agent_identity="bot", user_id="u1"
    )
    tmem.write_summary_state("chat", SummaryState("Earlier: greetings.", 1), 0)
    ctx = build(
        tmem,
        user_id="u1",
        system_prompt="You are kind.",
        query_embedding=basis(1, 1, 0),  # cosine 0.707 with HIKING and PEANUTS
    )
    roles = [m["role"] for m in ctx.messages]
    assert roles == ["system", "system", "system", "user", "user"]
    assert ctx.messages[0]["content"] == "You are kind."
    assert ctx.messages[1]["content"] == "Rolling session summary: Earlier: greetings."
    lines = ctx.messages[2]["content"].split("\n")
    today = datetime.now(UTC).date().isoformat()
    assert lines == [
        "Relevant memories:",
        "Notes and facts:",
        f"- ({today}, note) {PEANUTS}",
        f"Session old ({today}):",
        f"- ({today}, user) {HIKING}",
    ]
    assert [m["content"] for m in ctx.messages[3:]] == ["turn 2", "turn 3"]
    assert [i.source for i in ctx.items] == ["summary", "memory", "memory", "recent", "recent"]
    summary, mem1, _, recent2, recent3 = ctx.items
    assert summary.sequence == 1 and "up to sequence 1" in summary.reason
    assert mem1.reason.startswith("similarity 0.71 ≥ 0.655; final ")
    assert mem1.chunk_id is not None and mem1.explain["similarity"] == pytest.approx(0.7071, 1e-3)
    assert (recent2.sequence, recent3.sequence) == (2, 3)
    assert "latest turn #1" in recent3.reason
    assert ctx.reserved == message_tokens(ctx.messages[0])
    check_accounting(ctx)
    costs = sum(message_tokens(m) for m in ctx.messages)
    assert costs == ctx.tokens


def test_recency_leg_is_the_last_n_turns(tmem: mindfile.Mindfile) -> None:
    tmem.store_many([("chat", i, user(f"turn {i}")) for i in range(1, 16)])
    ctx = build(tmem)
    assert [i.sequence for i in ctx.items] == list(range(6, 16))
    ctx = build(tmem, config=seed_config(recent_turns=3))
    assert [m["content"] for m in ctx.messages] == ["turn 13", "turn 14", "turn 15"]
    assert build(tmem, config=seed_config(recent_turns=0)).messages == ()


def test_turns_covered_by_the_summary_are_left_out(tmem: mindfile.Mindfile) -> None:
    tmem.store_many([("chat", i, user(f"turn {i}")) for i in range(1, 16)])
    tmem.write_summary_state("chat", SummaryState("s", 12), 0)
    ctx = build(tmem)
    assert [i.sequence for i in ctx.items if i.source == "recent"] == [13, 14, 15]


def test_relevance_threshold_is_inclusive_and_configurable(tmem: mindfile.Mindfile) -> None:
    tmem.store_many(
        [
            ("other", 1, user("sim 0.66")),
            ("other", 2, user("sim 0.65")),
            ("other", 3, user(BATTERY)),
        ],
        agent_identity="bot",
    )
    ctx = build(tmem, agent_identity="bot")  # default 0.655
    assert memories(ctx) == ["sim 0.66"]
    exact = ctx.items[0].explain["similarity"]
    assert exact == pytest.approx(0.66, abs=1e-6)
    ctx = build(tmem, agent_identity="bot", config=seed_config(relevance_threshold=exact))
    assert memories(ctx) == ["sim 0.66"]
    above = math.nextafter(exact, 1.0)
    ctx = build(tmem, agent_identity="bot", config=seed_config(relevance_threshold=above))
    assert memories(ctx) == []
    ctx = build(tmem, agent_identity="bot", config=seed_config(relevance_threshold=0.6))
    assert memories(ctx) == ["sim 0.66", "sim 0.65"]


def test_salient_chunks_come_first_whatever_their_similarity(tmem: mindfile.Mindfile) -> None:
    tmem.store_many(
        [("old", 1, user(HIKING)), ("old", 2, user(PEANUTS)), ("old", 3, user(BATTERY))],
        agent_identity="bot",
    )
    tmem.store("old", 4, user("sim 0.80"), agent_identity="bot")
    set_chunk(tmem, PEANUTS, importance=0.9)
    set_chunk(tmem, BATTERY, importance=0.84)
    ctx = build(tmem, agent_identity="bot")
    assert memories(ctx) == [PEANUTS, HIKING, "sim 0.80"]
    salient = ctx.items[0]
    assert salient.source == "salient"
    assert salient.reason.startswith("importance 0.90 ≥ 0.85; final 0.29 = 0.70×0.00")
    set_chunk(tmem, BATTERY, importance=0.1, pinned=1)
    ctx = build(tmem, agent_identity="bot")
    assert [i.text for i in ctx.items if i.source == "salient"] == [BATTERY, PEANUTS]
    assert ctx.items[0].reason.startswith("pinned; final")
    ctx = build(tmem, agent_identity="bot", config=seed_config(max_salient=1))
    assert memories(ctx) == [BATTERY, HIKING, "sim 0.80"]
    assert any("max_salient=1" in d.reason for d in ctx.dropped)
    # A salient chunk that is also relevant says both.
    set_chunk(tmem, HIKING, importance=0.95)
    ctx = build(tmem, agent_identity="bot")
    hiking = next(i for i in ctx.items if i.text == HIKING)
    assert (
        hiking.source == "salient" and "importance 0.95 ≥ 0.85 and similarity 1.00" in hiking.reason
    )


def test_salience_uses_the_effective_decayed_importance(tmem: mindfile.Mindfile) -> None:
    tmem.store("old", 1, user(PEANUTS), agent_identity="bot")
    set_chunk(tmem, PEANUTS, importance=0.9)
    assert memories(build(tmem, agent_identity="bot")) == [PEANUTS]
    set_decay_policy(tmem, 3600.0, 0.0)
    later = datetime.now(UTC) + timedelta(days=1)
    assert memories(build(tmem, agent_identity="bot", now=later)) == []
    set_chunk(tmem, PEANUTS, pinned=1)  # pinned: always 1.0
    assert memories(build(tmem, agent_identity="bot", now=later)) == [PEANUTS]


def test_the_recent_window_is_not_repeated_as_memory(tmem: mindfile.Mindfile) -> None:
    tmem.store("chat", 1, user(HIKING))
    tmem.store_many([("chat", i, assistant(f"filler {i}")) for i in range(2, 13)])
    ctx = build(tmem)  # HIKING (sequence 1) is outside the last 10: a memory
    assert memories(ctx) == [HIKING]
    ctx = build(tmem, config=seed_config(recent_turns=12))  # inside: a turn only
    assert memories(ctx) == []
    assert ctx.messages[0]["content"] == HIKING


def test_duplicates_are_removed_and_reported(tmem: mindfile.Mindfile) -> None:
    tmem.store("a", 1, user(HIKING), agent_identity="bot")
    tmem.store("b", 1, user(HIKING), agent_identity="bot")
    tmem.store("c", 1, user("near copy"), agent_identity="bot")
    ctx = build(tmem, agent_identity="bot")
    assert memories(ctx) == [HIKING]
    reasons = sorted(d.reason for d in ctx.dropped)
    assert len(reasons) == 2
    assert reasons[0].startswith("near-duplicate of ch_") and "(cosine 0.990 ≥ 0.95)" in reasons[0]
    assert reasons[1].startswith("same content as ch_")
    ctx = build(tmem, agent_identity="bot", config=seed_config(near_duplicate=1.0))
    assert sorted(memories(ctx)) == sorted([HIKING, "near copy"])


def test_cross_session_scope_is_the_same_agent(tmem: mindfile.Mindfile) -> None:
    tmem.store("mine", 1, user(HIKING), agent_identity="bot")
    tmem.store("theirs", 1, user("sim 0.80"), agent_identity="other-bot")
    tmem.store("nobody", 1, user("sim 0.66"))
    tmem.store("chat", 1, user("hello"), agent_identity="bot")
    assert memories(build(tmem)) == [HIKING]
    assert memories(build(tmem, config=seed_config(cross_session=False))) == []
    # A session without an identity has no cross-session recall...
    tmem.store("anon", 1, user("hello"))
    assert memories(build(tmem, session="anon")) == []
    # ... unless the caller names the agent (e.g. a brand-new session).
    assert memories(build(tmem, session="new", agent_identity="other-bot")) == ["sim 0.80"]


def test_notes_and_facts_of_the_user_only(tmem: mindfile.Mindfile) -> None:
    tmem.store("chat", 1, user("hello"))
    tmem.store_note("memory:alice", "n1", HIKING)
    tmem.store_note("memory:bob", "n1", "sim 0.80")
    tmem.set_fact("alice", "hobby", "likes", "sim 0.66")
    assert memories(build(tmem)) == []
    ctx = build(tmem, user_id="alice", config=seed_config(relevance_threshold=-1.0))
    assert HIKING in memories(ctx) and "sim 0.80" not in memories(ctx)
    fact_lines = [ln for ln in ctx.messages[0]["content"].split("\n") if "(" in ln and "fact" in ln]
    assert fact_lines and fact_lines[0].endswith("hobby / likes: sim 0.66")


def test_channel_restricts_other_sessions(tmem: mindfile.Mindfile) -> None:
    tmem.store("s1", 1, user(HIKING), channel="slack", agent_identity="bot", user_id="u")
    # A session stored without a channel, whose events say theirs in metadata.
    tmem.store("s2", 1, user("sim 0.80"), metadata={"channel": "email"}, agent_identity="bot")
    tmem.store("s2", 2, user("sim 0.66"), metadata={"channel": "slack"}, user_id="u")
    tmem.store("s3", 1, user("sim 0.65"), agent_identity="bot", user_id="u")
    tmem.store("chat", 1, user("near copy"), channel="email", agent_identity="bot", user_id="u")
    tmem.store_many([("chat", i, assistant(f"filler {i}")) for i in range(2, 13)])
    tmem.store_note("memory:u", "n", "sim 0.80 note")
    cfg = seed_config(relevance_threshold=0.6, near_duplicate=1.0)
    everything = build(tmem, user_id="u", config=cfg)
    assert len(memories(everything)) == 6
    ctx = build(tmem, user_id="u", channel="slack", config=cfg)
    # Other sessions: only slack ones (or slack chunks of a session without a channel).
    # The current session and notes: always.
    assert sorted(memories(ctx)) == sorted([HIKING, "sim 0.66", "near copy", "sim 0.80 note"])


def test_lookback_window(tmem: mindfile.Mindfile) -> None:
    tmem.store("old", 1, user(HIKING), agent_identity="bot", user_id="u")
    tmem.store("old", 2, user(PEANUTS), agent_identity="bot")
    tmem.store_note("memory:u", "n", "sim 0.80")
    long_ago = (datetime.now(UTC) - timedelta(days=100)).isoformat(timespec="microseconds")
    for text in (HIKING, PEANUTS, "sim 0.80"):
        set_chunk(tmem, text, created_at=long_ago)
    set_chunk(tmem, PEANUTS, importance=0.9)
    ctx = build(tmem, agent_identity="bot", user_id="u")
    # Old conversation out; the old note and the salient memory stay.
    assert memories(ctx) == [PEANUTS, "sim 0.80"]
    ctx = build(tmem, agent_identity="bot", user_id="u", config=seed_config(lookback_days=None))
    assert memories(ctx) == [PEANUTS, HIKING, "sim 0.80"]
    ctx = build(tmem, agent_identity="bot", user_id="u", config=seed_config(lookback_days=200))
    assert HIKING in memories(ctx)


def test_expired_chunks_are_never_recalled_unless_pinned(tmem: mindfile.Mindfile) -> None:
    tmem.store("old", 1, user(HIKING), agent_identity="bot")
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat(timespec="microseconds")
    set_chunk(tmem, HIKING, expires_at=past)
    assert memories(build(tmem, agent_identity="bot")) == []
    set_chunk(tmem, HIKING, pinned=1)
    assert memories(build(tmem, agent_identity="bot")) == [HIKING]


def test_lexical_leg_admits_bm25_hits(tmem: mindfile.Mindfile) -> None:
    tmem.store("old", 1, user(BATTERY), agent_identity="bot")
    tmem.store("old", 2, user(PEANUTS), agent_identity="bot")
    off = seed_config(lexical_k=0)  # the seed's three legs only
    assert memories(build(tmem, agent_identity="bot", query="home batteries", config=off)) == []
    cfg = seed_config(lexical_k=1)
    ctx = build(tmem, agent_identity="bot", query="home batteries", config=cfg)
    assert memories(ctx) == [BATTERY]
    assert ctx.items[0].reason.startswith("lexical match (BM25 top 1); final")


def test_max_memories(tmem: mindfile.Mindfile) -> None:
    for i, text in enumerate([HIKING, "sim 0.80", "sim 0.66"], start=1):
        tmem.store("old", i, user(text), agent_identity="bot")
    ctx = build(tmem, agent_identity="bot", config=seed_config(max_memories=2))
    assert memories(ctx) == [HIKING, "sim 0.80"]
    assert [d.reason for d in ctx.dropped] == ["ranked below max_memories=2"]


def test_degrades_without_the_query_embedder(tmp_path: Path) -> None:
    with mindfile.open(tmp_path / "f.db", embedder=FailingQueryEmbedder(TABLE)) as mem:
        mem.store("old", 1, user(HIKING), agent_identity="bot")
        mem.store("old", 2, user(PEANUTS), agent_identity="bot")
        set_chunk(mem, PEANUTS, importance=0.9)
        off = seed_config(lexical_k=0)  # the vector leg alone
        ctx = mem.build_context(
            "chat", "hiking?", token_budget=500, agent_identity="bot", config=off
        )
        assert ctx.degraded is not None and "embedding service is down" in ctx.degraded
        assert memories(ctx) == [PEANUTS]
        # The lexical leg still finds the hiking turn while the embedder is down.
        ctx = mem.build_context("chat", "hiking?", token_budget=500, agent_identity="bot")
        assert ctx.degraded is not None and set(memories(ctx)) == {PEANUTS, HIKING}
        # An empty query is not a failure: no relevance leg, nothing degraded.
        ctx = mem.build_context("chat", "  ", token_budget=500, agent_identity="bot")
        assert ctx.degraded is None and memories(ctx) == [PEANUTS]


@pytest.mark.sqlite_only("total_changes() is SQLite's")
def test_building_writes_nothing(tmem: mindfile.Mindfile) -> None:
    tmem.store("old", 1, user(HIKING), agent_identity="bot")
    before = tmem.db.scalar("SELECT total_changes()")
    build(tmem, agent_identity="bot")
    assert tmem.db.scalar("SELECT total_changes()") == before


def test_semantic_relevance_with_the_bundled_model(mem_static: mindfile.Mindfile) -> None:
    peanuts = (
        "By the way, I'm severely allergic to peanuts, so please never suggest recipes with them."
    )
    mem_static.store_many(
        [
            ("monday", 1, user(peanuts)),
            ("monday", 2, user("My dog Pixel is a three-year-old border collie.")),
            ("monday", 3, user("We size home batteries for rooftop solar.")),
        ],
        agent_identity="maya-bot",
    )
    q = "Can you suggest a recipe? Remember my food allergies."
    mem_static.store("friday", 1, user(q), agent_identity="maya-bot")
    off = seed_config(lexical_k=0)  # relevance by cosine alone
    ctx = mem_static.build_context("friday", q, token_budget=400, config=off)
    assert memories(ctx) == [peanuts]  # cosine 0.71; the others are below 0.3
    assert ctx.messages[-1] == user(q)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"session": ""}, InvalidInputError),
        ({"query": 3}, InvalidInputError),
        ({"token_budget": 0}, InvalidInputError),
        ({"token_budget": 10.5}, InvalidInputError),
        ({"config": {"recent_turns": 3}}, InvalidInputError),
        ({"now": datetime(2026, 1, 1)}, InvalidInputError),
        ({"reserve_system": -1}, InvalidInputError),
        ({"system_prompt": 5}, InvalidInputError),
        ({"tools": "x"}, InvalidInputError),
        ({"tools": [{"f": object()}]}, InvalidInputError),
        ({"query_embedding": [1.0, 2.0]}, InvalidInputError),
        ({"user_id": ""}, InvalidInputError),
        ({"channel": ""}, InvalidInputError),
        ({"token_counter": "words"}, InvalidInputError),
        ({"reserve_tools": 3000}, LimitExceededError),
    ],
)
def test_bad_arguments_are_typed_errors(
    tmem: mindfile.Mindfile, kwargs: dict[str, object], error: type[Exception]
) -> None:
    args: dict[str, object] = {"session": "chat", "query": "q"}
    args.update(kwargs)
    with pytest.raises(error):
        build(tmem, **args)


def test_the_sqlite_vec_index_gives_the_same_context(tmp_path: Path) -> None:
    contexts = []
    for index in ("exact", "sqlite-vec"):
        path = tmp_path / f"{index}.db"
        with mindfile.open(path, embedder=TableEmbedder(TABLE), vector_index=index) as mem:
            for i, text in enumerate([HIKING, "sim 0.80", "sim 0.66", "sim 0.65"], start=1):
                mem.store("old", i, user(text), agent_identity="bot")
            mem.store("other", 1, user("near copy"), agent_identity="someone-else")
            contexts.append(memories(build(mem, agent_identity="bot")))
    assert contexts[0] == contexts[1] == [HIKING, "sim 0.80", "sim 0.66"]
