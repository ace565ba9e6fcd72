"""The LLM tasks end to end: a real loopback server, a real on-disk store, and the real
summarizer. A malformed answer must store nothing and leave a recorded failure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mindfile
from mindfile.errors import InvalidInputError, LLMError
from mindfile.llm import (
    CONDENSE_SCHEMA,
    EXTRACT_SCHEMA,
    NOTE_SOURCE,
    OpenAICompatibleClient,
    ScriptedChatClient,
    delete_llm_failures,
    extract_facts,
    list_llm_failures,
    llm_condenser,
    llm_merge,
)
from mindfile.memory import SECTION_HEADING, SUMMARY_PREFIX
from mindfile.tokens import message_tokens

from ._server import FakeOpenAIServer, Reply, chat, chat_json, snapshot

CONVERSATION = [
    {"role": "user", "content": "I moved to Lisbon in May and I'm vegetarian now."},
    {"role": "assistant", "content": "Noted! Any plans for the summer?"},
    {"role": "user", "content": "Hiking the Rota Vicentina trail with my sister in July."},
]

EXTRACTED = {
    "facts": [
        {"category": "Location", "key": "home_city", "value": "Lisbon"},
        {"category": "preferences", "key": "diet", "value": "vegetarian"},
    ],
    "notes": [
        {
            "content": "Plans to hike the Rota Vicentina trail with their sister in July.",
            "tags": ["Travel", "plans"],
        }
    ],
}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[mindfile.Mindfile]:
    with mindfile.open(tmp_path / "m.db", embedder="hash") as mem:
        yield mem


# -- fact extraction -----------------------------------------------------------------------


def test_extract_facts_stores_searchable_facts_and_notes(
    store: mindfile.Mindfile,
    llm: OpenAICompatibleClient,
    llm_server: FakeOpenAIServer,
    tmp_path: Path,
) -> None:
    llm_server.script(chat_json(EXTRACTED))
    result = extract_facts(store, llm, CONVERSATION, user_id="u1", session_id="run-1")

    assert [(f.category, f.key, f.value, f.source) for f in result.facts] == [
        ("location", "home_city", "Lisbon", "agent"),
        ("preferences", "diet", "vegetarian", "agent"),
    ]
    [note] = result.notes
    assert note.note_id.startswith("note-") and len(note.note_id) == 5 + 32
    assert note.session_id == "memory:u1" and note.source == NOTE_SOURCE
    assert note.tags == ("travel", "plans")
    assert result.model == "test-model" and result.session_id == "run-1"
    assert json.loads(json.dumps(result.to_dict()))["facts"][0]["value"] == "Lisbon"

    # What the model was asked: the schema, and the conversation as data.
    body = llm_server.requests[0].body
    assert body["response_format"]["json_schema"]["schema"] == EXTRACT_SCHEMA
    prompt = body["messages"][1]["content"]
    assert "user: I moved to Lisbon in May" in prompt and "<conversation>" in prompt

    # Found again through the engine's own APIs, also after reopening the file.
    store.close()
    with mindfile.open(tmp_path / "m.db") as mem:
        fact = mem.get_fact("u1", "location", "home_city")
        assert fact is not None and fact.value == "Lisbon"
        hits = mem.search_notes("memory:u1", "Rota Vicentina hike", facts_scope="u1")
        assert any(h.kind == "note" and h.note_id == note.note_id for h in hits)
        fact_hits = mem.search_notes("memory:u1", "vegetarian diet", facts_scope="u1")
        assert any(h.kind == "fact" and h.key == "diet" for h in fact_hits)
        assert [n.note_id for n in mem.list_notes("memory:u1", tags=["travel"])] == [note.note_id]


def test_known_facts_are_shown_and_updates_keep_history(
    store: mindfile.Mindfile, llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer
) -> None:
    store.set_fact("u1", "location", "home_city", "Porto")
    update = {
        "facts": [
            {"category": "location", "key": "home_city", "value": "Braga"},
            {"category": " Location ", "key": "HOME_CITY", "value": "Lisbon"},  # last wins
        ],
        "notes": [],
    }
    llm_server.script(chat_json(update))
    result = extract_facts(store, llm, CONVERSATION, user_id="u1")
    assert "- location / home_city: Porto" in llm_server.requests[0].body["messages"][1]["content"]
    assert [f.value for f in result.facts] == ["Lisbon"]
    assert [v.value for v in store.fact_history("u1", "location", "home_city")] == ["Porto"]


def test_extract_from_stored_records(
    store: mindfile.Mindfile, llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer
) -> None:
    for i, message in enumerate(CONVERSATION, start=1):
        store.store("run-2", i, message)
    llm_server.script(chat_json({"facts": [], "notes": []}))
    result = extract_facts(store, llm, store.recall("run-2"), user_id="u1", session_id="run-2")
    assert result.facts == () and result.notes == ()
    assert "Rota Vicentina" in llm_server.requests[0].body["messages"][1]["content"]


def test_nothing_to_read_makes_no_call(
    store: mindfile.Mindfile, llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer
) -> None:
    result = extract_facts(store, llm, [{"role": "user", "content": "   "}], user_id="u1")
    assert result.to_dict() == {
        "user_id": "u1",
        "session_id": None,
        "facts": [],
        "notes": [],
        "model": None,
    }
    assert llm_server.requests == []


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (
            chat('{"facts": [{"category": "location", "key": "city", "value": "Lis'),
            "malformed_json",
        ),
        (chat_json({"facts": EXTRACTED["facts"]}), "schema_invalid"),  # no "notes"
        (chat_json({**EXTRACTED, "facts": [{"category": "x", "key": "y"}]}), "schema_invalid"),
        (chat("Sure! Here are the facts: Lisbon, vegetarian."), "malformed_json"),
        (Reply(status=400, body={"error": {"message": "bad request"}}), "http_status"),
    ],
)
def test_a_failed_extraction_stores_nothing_and_is_recorded(
    store: mindfile.Mindfile,
    llm: OpenAICompatibleClient,
    llm_server: FakeOpenAIServer,
    reply: Reply,
    reason: str,
) -> None:
    before = snapshot(store)
    llm_server.script(reply)
    with pytest.raises(LLMError) as info:
        extract_facts(store, llm, CONVERSATION, user_id="u1", session_id="run-1")
    assert snapshot(store) == before
    assert store.list_facts("u1") == [] and store.list_notes("memory:u1") == []
    [failure] = list_llm_failures(store)
    assert info.value.details["failure_id"] == failure.id
    assert (failure.task, failure.reason, failure.scope, failure.session_id) == (
        "extract_facts",
        reason,
        "u1",
        "run-1",
    )
    assert failure.model == "test-model"
    if reason != "http_status":
        assert failure.raw_excerpt == reply.body["choices"][0]["message"]["content"]
    assert json.loads(json.dumps(failure.to_dict()))["reason"] == reason


def test_content_the_store_refuses_rolls_back_everything(
    store: mindfile.Mindfile, llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer
) -> None:
    """Both facts are valid and written before the lone surrogate in the note is seen:
    the whole transaction must roll back, and the vector index must not keep lost rows."""
    bad = {**EXTRACTED, "notes": [{"content": "broken \ud800 text", "tags": []}]}
    before = snapshot(store)
    llm_server.script(chat_json(bad))
    with pytest.raises(LLMError) as info:
        extract_facts(store, llm, CONVERSATION, user_id="u1")
    assert info.value.details["reason"] == "invalid_content"
    assert snapshot(store) == before
    assert list(store.search("Lisbon", mode="vector", top_k=5)) == []
    [failure] = list_llm_failures(store, task="extract_facts")
    assert failure.reason == "invalid_content" and "surrogate" in failure.message

    llm_server.script(chat_json(EXTRACTED))  # and the store still works afterwards
    assert len(extract_facts(store, llm, CONVERSATION, user_id="u1").facts) == 2
    assert list(store.search("Lisbon", top_k=5))


def test_a_storage_failure_keeps_the_answer_and_raises_it(
    store: mindfile.Mindfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mindfile.errors import EmbeddingError

    client = ScriptedChatClient([json.dumps(EXTRACTED)])

    def broken(texts: Any) -> Any:
        raise RuntimeError("embedding service is down")

    monkeypatch.setattr(store.embedder, "embed_documents", broken)
    with pytest.raises(EmbeddingError) as info:
        extract_facts(store, client, CONVERSATION, user_id="u1")
    monkeypatch.undo()
    assert store.list_facts("u1") == []
    [failure] = list_llm_failures(store)
    assert failure.reason == "store_failed" and info.value.details["failure_id"] == failure.id
    assert failure.raw_excerpt is not None and json.loads(failure.raw_excerpt) == EXTRACTED


def test_any_chat_client_breaking_its_contract_is_recorded(store: mindfile.Mindfile) -> None:
    class Broken:
        def complete(self, messages: Any, **kwargs: Any) -> Any:
            raise RuntimeError("socket exploded")

    with pytest.raises(LLMError) as info:
        extract_facts(store, Broken(), CONVERSATION, user_id="u1")
    assert info.value.details["reason"] == "client_error"
    assert list_llm_failures(store)[0].reason == "client_error"


def test_bad_arguments_are_rejected_before_any_call(store: mindfile.Mindfile) -> None:
    client = ScriptedChatClient([])
    bad: list[dict[str, Any]] = [{"user_id": ""}, {"user_id": "u1", "session_id": ""}]
    for kwargs in bad:
        with pytest.raises(InvalidInputError):
            extract_facts(store, client, CONVERSATION, **kwargs)
    with pytest.raises(InvalidInputError):
        extract_facts(store, client, "just a string", user_id="u1")
    assert client.calls == []


def test_failure_log_can_be_purged(store: mindfile.Mindfile) -> None:
    for user in ("u1", "u2"):
        with pytest.raises(LLMError):
            extract_facts(store, ScriptedChatClient(["{"]), CONVERSATION, user_id=user)
    assert len(list_llm_failures(store)) == 2
    assert [f.scope for f in list_llm_failures(store, scope="u2")] == ["u2"]
    with pytest.raises(InvalidInputError):
        delete_llm_failures(store)
    assert delete_llm_failures(store, scope="u1") == 1
    assert delete_llm_failures(store, purge_all=True) == 1
    assert list_llm_failures(store) == []


# -- the condenser inside the real summarizer ----------------------------------------------

S = "chat"


def add_turns(mem: mindfile.Mindfile, count: int) -> int:
    for i in range(1, count + 1):
        role = "user" if i % 2 else "assistant"
        mem.store(S, i, {"role": role, "content": f"Turn {i} is about topic {i}. " * 8})
    return sum(message_tokens(r.payload) for r in mem.recall(S))


def test_llm_condenser_in_the_real_summarizer(
    store: mindfile.Mindfile, llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer
) -> None:
    cost = add_turns(store, 10)
    llm_server.default = chat_json({"bullets": ["user: talked about topic 1", "- assistant: ok"]})
    ctx = store.summarize(S, int(cost / 0.9), condenser=llm_condenser(llm))
    assert ctx.condensed > 0 and ctx.summary is not None
    assert ctx.summary.startswith(SECTION_HEADING)
    assert "- user: talked about topic 1\n- assistant: ok" in ctx.summary
    assert ctx.messages[0]["content"].startswith(SUMMARY_PREFIX)
    state = store.read_summary_state(S)
    assert state is not None and state.summary == ctx.summary
    body = llm_server.requests[0].body
    assert body["response_format"]["json_schema"]["schema"] == CONDENSE_SCHEMA
    assert "user: Turn 1 is about topic 1." in body["messages"][1]["content"]


@pytest.mark.parametrize(
    "reply",
    [chat("- user: talked about topic 1"), chat_json({"bullets": []}), Reply(status=503)],
)
def test_a_failing_condenser_leaves_the_summary_untouched(
    store: mindfile.Mindfile,
    llm: OpenAICompatibleClient,
    llm_server: FakeOpenAIServer,
    reply: Reply,
) -> None:
    cost = add_turns(store, 10)
    llm_server.default = reply
    condense = llm_condenser(llm, failures=store)
    with pytest.raises(LLMError) as info:
        store.summarize(S, int(cost / 0.9), condenser=condense)
    assert store.read_summary_state(S) is None
    [failure] = list_llm_failures(store, task="condense")
    assert failure.id == info.value.details["failure_id"]


def test_condenser_skips_the_model_when_there_is_no_text() -> None:
    client = ScriptedChatClient([])
    record = mindfile.MemoryRecord(S, 1, {"role": "user", "content": "  "}, "now")
    assert llm_condenser(client)([record]) == ""
    assert client.calls == []
    with pytest.raises(InvalidInputError):
        llm_condenser(client, max_message_chars=0)


# -- merging -------------------------------------------------------------------------------


def test_llm_merge(llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer) -> None:
    llm_server.script(chat_json({"text": "  Lives in Lisbon (moved from Porto in May).  "}))
    merge = llm_merge(llm)
    merged = merge(["Lives in Porto.", "Moved to Lisbon in May."])
    assert merged == "Lives in Lisbon (moved from Porto in May)."
    prompt = llm_server.requests[0].body["messages"][1]["content"]
    assert "1. Lives in Porto.\n2. Moved to Lisbon in May." in prompt


def test_llm_merge_without_a_call_and_bad_input() -> None:
    client = ScriptedChatClient([])
    merge = llm_merge(client)
    assert merge(["  Only one.  "]) == "Only one."
    assert merge(["Same  text.", "Same text."]) == "Same  text."
    for bad in ([], ["ok", "  "], "text", [1, 2]):
        with pytest.raises(InvalidInputError):
            merge(bad)  # type: ignore[arg-type]
    assert client.calls == []


@pytest.mark.parametrize("content", ['{"text": ""}', '{"merged": "x"}', "Lives in Lisbon."])
def test_llm_merge_rejects_a_malformed_answer(store: mindfile.Mindfile, content: str) -> None:
    merge = llm_merge(ScriptedChatClient([content]), failures=store)
    with pytest.raises(LLMError):
        merge(["a", "b"])
    assert list_llm_failures(store, task="merge")[0].raw_excerpt == content


def test_an_unstorable_raw_answer_is_still_recorded(store: mindfile.Mindfile) -> None:
    merge = llm_merge(ScriptedChatClient(["not json \ud800"]), failures=store)
    with pytest.raises(LLMError) as info:
        merge(["a", "b"])
    [failure] = list_llm_failures(store)
    assert failure.id == info.value.details["failure_id"]
    assert failure.reason == "malformed_json" and failure.raw_excerpt == "not json ?"
