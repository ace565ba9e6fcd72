"""Users never see each other's memory (issue 8 part 1, docs/privacy.md).

Two users of one assistant (same agent identity) share many words; every read API
scoped to one user must never return the other's text. Each user's secrets carry a
marker word (``alicemark`` / ``bobmark``) so a leak is a substring check.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

import mindfile
from mindfile.cli.main import cli
from mindfile.errors import ScopeError
from mindfile.memory import SummaryState
from mindfile.tools import dispatch


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


SECRETS = {
    "alice": [
        "my bank pin is 4321 alicemark",
        "I live in Lisbon near the river alicemark",
        "my sister Ana loves hiking in the mountains alicemark",
    ],
    "bob": [
        "my bank pin is 9876 bobmark",
        "I live in Porto near the river bobmark",
        "my sister Bea loves hiking in the mountains bobmark",
    ],
}
QUERIES = ["what is my bank pin?", "where do I live?", "sister hiking mountains", "river"]


def msg(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def populate(mem: mindfile.Mindfile) -> None:
    for user, texts in SECRETS.items():
        for n in (1, 2):
            sid = f"{user}-chat-{n}"
            mem.store_many(
                [(sid, i, msg(t)) for i, t in enumerate(texts, start=1)],
                agent_identity="assistant",
                user_id=user,
                channel="web" if n == 1 else "sms",
            )
        mem.store_note(f"memory:{user}", "pin", f"note: {texts[0]}")
        mem.set_fact(user, "home", "city", texts[1])
        mem.write_scratchpad(f"{user}-chat-1", [texts[2]])
        mem.write_summary_state(f"{user}-chat-1", SummaryState(f"summary: {texts[0]}", 1), 0)
    # An unscoped session of the same agent (a store written before users existed).
    mem.store("legacy", 1, msg("the legacy river note unscopedmark"), agent_identity="assistant")


@pytest.fixture(params=["memory", "fts5"])
def mem(request: pytest.FixtureRequest, db_path: str) -> Iterator[mindfile.Mindfile]:
    with mindfile.open(db_path, embedder="hash", lexical_index=request.param) as store:
        populate(store)
        yield store


def text_of(value: Any) -> str:
    """Everything a result says, as one string (dataclasses, lists, dicts)."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    elif isinstance(value, list):
        value = [v.to_dict() if hasattr(v, "to_dict") else v for v in value]
    return json.dumps(value, default=str)


def assert_only(user: str, value: Any) -> None:
    other = "bobmark" if user == "alice" else "alicemark"
    text = text_of(value)
    assert other not in text
    assert "unscopedmark" not in text


@pytest.mark.parametrize("user", ["alice", "bob"])
def test_search_is_scoped_in_every_mode_and_fusion(mem: mindfile.Mindfile, user: str) -> None:
    for q in QUERIES:
        for mode in ("hybrid", "vector", "fts"):
            for fusion in ("weighted", "rrf"):
                hits = mem.search(q, user_id=user, mode=mode, fusion=fusion, top_k=50)  # type: ignore[arg-type]
                assert hits, (q, mode)
                assert_only(user, hits)
                # Deep candidate pools and tag filters go through the same filter.
                assert_only(user, mem.search(q, user_id=user, mode=mode, candidates=1000))  # type: ignore[arg-type]
    everyone = text_of(mem.search("bank pin", top_k=50))
    assert "alicemark" in everyone and "bobmark" in everyone  # unscoped search sees all


def test_search_by_channel_and_session(mem: mindfile.Mindfile) -> None:
    web = mem.search("river", user_id="alice", channel="web", top_k=50)
    assert web and {h.session_id for h in web} == {"alice-chat-1"}
    # A session list and a user: only the sessions in both.
    both = mem.search("river", user_id="alice", session_id=["bob-chat-1", "alice-chat-2"])
    assert {h.session_id for h in both} == {"alice-chat-2"}
    assert list(mem.search("river", user_id="alice", session_id="bob-chat-1")) == []
    assert list(mem.search("river", user_id="nobody")) == []


@pytest.mark.parametrize("user", ["alice", "bob"])
def test_build_context_never_crosses_users(mem: mindfile.Mindfile, user: str) -> None:
    cfg = mindfile.ContextConfig(relevance_threshold=-1.0, max_memories=50)
    for q in QUERIES:
        for session in (f"{user}-chat-1", f"{user}-new"):
            ctx = mem.build_context(session, q, token_budget=4000, user_id=user, config=cfg)
            assert_only(user, ctx)
            assert f"{user}mark" in text_of(ctx)
        # The user is inferred from the session itself when not passed.
        assert_only(user, mem.build_context(f"{user}-chat-2", q, token_budget=4000, config=cfg))
    with pytest.raises(ScopeError):
        other = "bob" if user == "alice" else "alice"
        mem.build_context(f"{other}-chat-1", "pin", token_budget=4000, user_id=user)


def test_a_context_without_a_user_never_enters_a_users_session(mem: mindfile.Mindfile) -> None:
    cfg = mindfile.ContextConfig(relevance_threshold=-1.0, max_memories=50)
    for q in QUERIES:
        for session in ("legacy", "fresh"):
            ctx = mem.build_context(
                session, q, token_budget=4000, agent_identity="assistant", config=cfg
            )
            text = text_of(ctx)
            assert "alicemark" not in text and "bobmark" not in text
    # Unscoped sessions of one agent still share memory among themselves.
    ctx = mem.build_context(
        "fresh", "legacy river", token_budget=4000, agent_identity="assistant", config=cfg
    )
    assert "unscopedmark" in text_of(ctx)


def test_recall_sessions_notes_facts_scratchpad_summaries(mem: mindfile.Mindfile) -> None:
    assert_only("alice", mem.recall("alice-chat-1", user_id="alice"))
    with pytest.raises(ScopeError):
        mem.recall("bob-chat-1", user_id="alice")
    sessions = mem.list_sessions(user_id="alice")
    assert {s.session_id for s in sessions} == {
        "alice-chat-1",
        "alice-chat-2",
        "memory:alice",
        "facts:alice",
    }
    assert all(s.user_id == "alice" for s in sessions)
    assert {s.session_id for s in mem.list_sessions(user_id="alice", channel="sms")} == {
        "alice-chat-2"
    }
    assert_only("alice", mem.list_notes("memory:alice"))
    for q in QUERIES:
        assert_only("alice", mem.search_notes("memory:alice", q, facts_scope="alice"))
    assert_only("alice", mem.list_facts("alice"))
    assert_only("alice", mem.get_fact("alice", "home", "city"))
    assert_only("alice", mem.read_scratchpad("alice-chat-1"))
    assert_only("alice", mem.read_summary_state("alice-chat-1"))


@pytest.mark.parametrize("user", ["alice", "bob"])
def test_tools_answer_only_for_the_calling_user(mem: mindfile.Mindfile, user: str) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [("memory_search", {"query": q}) for q in QUERIES] + [
        ("fact_list", {}),
        ("fact_get", {"category": "home", "key": "city", "include_history": True}),
        ("scratchpad_read", {}),
    ]
    seen = ""
    for name, args in calls:
        answer = dispatch(mem, name, args, user_id=user, session_id=f"{user}-chat-1")
        assert answer["ok"] is True, answer
        assert_only(user, answer)
        seen += text_of(answer)
    assert f"{user}mark" in seen


def test_a_session_keeps_its_user(mem: mindfile.Mindfile) -> None:
    before = mem.recall("bob-chat-1")
    with pytest.raises(ScopeError):
        mem.store("bob-chat-1", 10, msg("alice writes here alicemark"), user_id="alice")
    with pytest.raises(ScopeError):
        mem.store_many([("bob-chat-1", 10, msg("x"))], user_id="alice")
    with pytest.raises(ScopeError):
        mem.store("bob-chat-1", 10, msg("another channel"), channel="email")
    with pytest.raises(ScopeError):
        mem.store("memory:bob", 1, msg("a namespace names its user"), user_id="alice")
    assert mem.recall("bob-chat-1") == before  # nothing half-written
    # Omitting the user keeps the session's; an unscoped session is adopted once.
    mem.store("bob-chat-1", 10, msg("bob again"))
    mem.store("legacy", 2, msg("now alice's"), user_id="alice")
    assert [s.user_id for s in mem.list_sessions() if s.session_id == "legacy"] == ["alice"]


def test_cli_scoping(mem: mindfile.Mindfile) -> None:
    path = mem.path
    runner = CliRunner()
    out = runner.invoke(cli, ["search", "bank pin", "--user", "alice", "--db", str(path)])
    assert out.exit_code == 0, out.output
    assert "alicemark" in out.output and "bobmark" not in out.output
    out = runner.invoke(cli, ["sessions", "--user", "bob", "--json", "--db", str(path)])
    assert out.exit_code == 0, out.output
    assert {s["session_id"] for s in json.loads(out.output)} == {
        "bob-chat-1",
        "bob-chat-2",
        "memory:bob",
        "facts:bob",
    }
    out = runner.invoke(cli, ["recall", "bob-chat-1", "--user", "alice", "--db", str(path)])
    assert out.exit_code == ScopeError.exit_code
    assert "bobmark" not in out.output
    out = runner.invoke(
        cli, ["add", "carol-1", "hello carolmark", "--user", "carol", "--db", str(path)]
    )
    assert out.exit_code == 0, out.output
    assert mem.list_sessions(user_id="carol")[0].session_id == "carol-1"
