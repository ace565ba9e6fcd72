"""The memories message grouped by session (issue 14): sessions oldest first with their
dates, each session's memories in order, notes and facts in their own group."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import mindfile
from mindfile.context import Context, ContextConfig
from mindfile.context.render import MemoryLine, grouped_lines, session_header
from mindfile.errors import ConfigError
from mindfile.tokens import message_tokens

# Every memory mentions a cat, so the lexical and hybrid legs find all of them.
EVENTS = [
    # (session, sequence, text, occurred_at): sessions stored out of time order on purpose.
    ("march", 1, "I adopted a second cat, Luna, today.", "2026-03-05T18:00:00+00:00"),
    ("march", 2, "The cat Luna knocked my coffee over.", "2026-03-06T09:00:00+00:00"),
    ("march", 3, "Vet visit for the cat Luna went fine.", "2026-03-09T12:00:00+00:00"),
    ("january", 1, "My first cat Olive turned three.", "2026-01-10T08:00:00+00:00"),
    ("february", 4, "Bought a cat tree for Olive.", "2026-02-02T08:00:00+00:00"),
]
NOTE = "Maya's cats: Olive and Luna."


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[mindfile.Mindfile]:
    with mindfile.open(tmp_path / "g.db") as store:
        for session, seq, text, when in EVENTS:
            store.store(session, seq, {"role": "user", "content": text}, user_id="maya",
                        occurred_at=when)  # fmt: skip
        store.store_note("memory:maya", "cats", NOTE)
        store.set_fact("maya", "pets", "cats", "Olive, Luna")
        yield store


def build(mem: mindfile.Mindfile, budget: int = 2000, **cfg: object) -> Context:
    config = ContextConfig(**cfg)  # type: ignore[arg-type]
    return mem.build_context("now", "how many cats do I have?", token_budget=budget,
                             user_id="maya", config=config)  # fmt: skip


def memory_lines(ctx: Context) -> list[str]:
    msg = next(m for m in ctx.messages if m["content"].startswith("Relevant memories:"))
    return str(msg["content"]).split("\n")


def test_sessions_in_time_order_with_their_dates(mem: mindfile.Mindfile) -> None:
    lines = memory_lines(build(mem))
    assert lines[0] == "Relevant memories:"
    headers = [line for line in lines if not line.startswith("- ")]
    assert headers == [
        "Relevant memories:",
        "Notes and facts:",
        "Session january (2026-01-10):",
        "Session february (2026-02-02):",
        "Session march (2026-03-05 to 2026-03-09):",
    ]
    # Inside a session: the session's order (sequence), whatever the rank or the order
    # of storing; each line keeps its date and speaker, not the session (in the header).
    march = lines[lines.index("Session march (2026-03-05 to 2026-03-09):") + 1 :]
    assert march == [
        "- (2026-03-05, user) I adopted a second cat, Luna, today.",
        "- (2026-03-06, user) The cat Luna knocked my coffee over.",
        "- (2026-03-09, user) Vet visit for the cat Luna went fine.",
    ]
    assert "- (2026-01-10, user) My first cat Olive turned three." in lines


def test_notes_and_facts_have_their_own_group(mem: mindfile.Mindfile) -> None:
    lines = memory_lines(build(mem))
    start = lines.index("Notes and facts:")
    group = lines[start + 1 : start + 3]
    assert start == 1 and lines[start + 3].startswith("Session ")
    assert any(line.endswith(NOTE) and ", note) " in line for line in group)
    assert any(", fact) " in line and "Olive, Luna" in line for line in group)
    assert not any("session" in line for line in group)


def test_items_keep_the_relevance_order_and_reasons(mem: mindfile.Mindfile) -> None:
    ctx = build(mem)
    items = [i for i in ctx.items if i.source in ("memory", "salient")]
    assert len(items) == 7
    scores = [i.score for i in items]
    assert scores == sorted(scores, reverse=True)
    assert all(i.reason and i.explain for i in items)
    ungrouped = build(mem, group_by_session=False)
    assert [i.chunk_id for i in ungrouped.items] == [i.chunk_id for i in ctx.items]


def test_ungrouped_is_one_line_per_memory_in_relevance_order(mem: mindfile.Mindfile) -> None:
    ctx = build(mem, group_by_session=False)
    lines = memory_lines(ctx)
    assert lines[0] == "Relevant memories:"
    assert len(lines) == 1 + 7 and all(line.startswith("- (") for line in lines[1:])
    assert "- (2026-03-06, session march, user) The cat Luna knocked my coffee over." in lines
    texts = [i.text for i in ctx.items if i.source == "memory"]
    assert [line.split(") ", 1)[1] for line in lines[1:]] == [" ".join(t.split()) for t in texts]


@pytest.mark.parametrize("budget", [60, 90, 130, 200, 400, 2000])
@pytest.mark.parametrize("grouped", [True, False])
def test_the_budget_counts_the_headers(mem: mindfile.Mindfile, budget: int, grouped: bool) -> None:
    ctx = build(mem, budget, group_by_session=grouped, recent_turns=0)
    assert ctx.tokens <= budget
    assert sum(i.tokens for i in ctx.items) + ctx.reserved == ctx.tokens
    assert sum(message_tokens(m) for m in ctx.messages) == ctx.tokens
    assert all(i.tokens > 0 for i in ctx.items)


def test_a_non_additive_counter_never_overflows(mem: mindfile.Mindfile) -> None:
    def lumpy(text: str) -> int:  # headers cost far more than their length suggests
        return len(text) // 3 + 25 * text.count("Session ")

    for budget in (80, 150, 300, 800):
        ctx = mem.build_context("now", "cats", token_budget=budget, user_id="maya",
                                token_counter=lumpy)  # fmt: skip
        assert ctx.tokens <= budget
        assert sum(i.tokens for i in ctx.items) + ctx.reserved == ctx.tokens


def test_grouped_lines_by_hand() -> None:
    lines = grouped_lines(
        [
            MemoryLine("- b2", "b", "2026-02-03T00:00:00+00:00", 2),
            MemoryLine("- note", None, "2026-05-01T00:00:00+00:00"),
            MemoryLine("- a1", "a", "2026-01-01T00:00:00+00:00", 1),
            MemoryLine("- b1", "b", "2026-02-01T00:00:00+00:00", 1),
        ]
    )
    assert lines == [
        "Notes and facts:",
        "- note",
        "Session a (2026-01-01):",
        "- a1",
        "Session b (2026-02-01 to 2026-02-03):",
        "- b1",
        "- b2",
    ]
    assert grouped_lines([]) == []
    same_time = "2026-01-01T00:00:00+00:00"  # stored in one batch: ids decide, numerically
    ids = ["session_10", "session_2", "session_1"]
    lines = grouped_lines([MemoryLine(f"- {s}", s, same_time) for s in ids])
    assert [line for line in lines if line.startswith("Session")] == [
        f"Session {s} (2026-01-01):" for s in ("session_1", "session_2", "session_10")
    ]
    assert session_header("s", "2026-01-01", "2026-01-01") == "Session s (2026-01-01):"


def test_the_option_is_validated() -> None:
    with pytest.raises(ConfigError):
        ContextConfig(group_by_session="yes")  # type: ignore[arg-type]
    assert ContextConfig().to_dict()["group_by_session"] is True
