"""The LLM reranker end to end: a real loopback OpenAI-compatible server, a real store.
A bad answer or a dead server never fails a search: fused order, ``degraded`` says why."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import mindfile
from mindfile.errors import InvalidInputError, LLMError
from mindfile.llm import RERANK_SCHEMA, OpenAICompatibleClient, ScriptedChatClient, llm_reranker

from ._server import FakeOpenAIServer, Reply, chat_json

MEMORIES = [
    "I moved to Lisbon in May.",
    "My sister Ines lives in Porto.",
    "The garden needs water every second day.",
    "I bought a blue bicycle last week.",
]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[mindfile.Mindfile]:
    with mindfile.open(tmp_path / "m.db", embedder="hash") as m:
        m.store_many([("chat", i, text) for i, text in enumerate(MEMORIES)])
        yield m


def _numbered(request_body: dict[str, object]) -> dict[int, str]:
    """The memories as the request numbered them."""
    messages = request_body["messages"]
    assert isinstance(messages, list)
    user = messages[-1]["content"]
    block = user.split("<memories>\n", 1)[1].split("\n</memories>", 1)[0]
    out = {}
    for line in block.splitlines():
        number, text = line[1:].split("] ", 1)
        out[int(number)] = text
    return out


def test_the_models_scores_order_the_hits(
    mem: mindfile.Mindfile, llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer
) -> None:
    fused = mem.search("where do I live?", top_k=4, rerank=False)
    texts = [h.text for h in fused]
    lisbon = texts.index("I moved to Lisbon in May.") + 1
    porto = texts.index("My sister Ines lives in Porto.") + 1
    others = [i for i in range(1, 5) if i not in (lisbon, porto)]
    llm_server.script(
        chat_json(
            {
                "scores": [
                    {"id": porto, "score": 3},
                    {"id": lisbon, "score": 9},
                    {"id": others[0], "score": 0},
                ]
            }
        )
    )
    mem.reranker = llm_reranker(llm)
    hits = mem.search("where do I live?", top_k=4)
    assert hits.degraded is None
    assert [h.text for h in hits[:2]] == [
        "I moved to Lisbon in May.",
        "My sister Ines lives in Porto.",
    ]
    assert [h.breakdown.rerank for h in hits] == [9.0, 3.0, 0.0, -1.0]  # unrated: last
    assert hits[3].text == texts[others[1] - 1]
    (request,) = llm_server.requests
    assert _numbered(request.body) == {i + 1: t for i, t in enumerate(texts)}
    assert "<question>where do I live?</question>" in request.body["messages"][-1]["content"]
    schema = request.body["response_format"]["json_schema"]["schema"]
    assert schema == json.loads(json.dumps(RERANK_SCHEMA))


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (chat_json({"scores": [{"id": 9, "score": 5}]}), "unknown memory number 9"),
        (
            chat_json({"scores": [{"id": 1, "score": 5}, {"id": 1, "score": 2}]}),
            "repeated memory number 1",
        ),
        (chat_json({"scores": [{"id": 1, "score": 11}]}), "rerank unavailable"),
        (chat_json({"ranking": [1, 2]}), "rerank unavailable"),
        (Reply(status=400, body={"error": {"message": "bad request"}}), "400"),
    ],
)
def test_a_bad_answer_leaves_the_fused_order(
    mem: mindfile.Mindfile,
    llm: OpenAICompatibleClient,
    llm_server: FakeOpenAIServer,
    reply: Reply,
    why: str,
) -> None:
    fused = [h.chunk_id for h in mem.search("where do I live?", top_k=4, rerank=False)]
    llm_server.script(reply)
    hits = mem.search("where do I live?", top_k=4, rerank=llm_reranker(llm))
    assert [h.chunk_id for h in hits] == fused
    assert hits.degraded is not None and hits.degraded.startswith("rerank unavailable")
    assert why in hits.degraded
    assert all(h.breakdown.rerank is None for h in hits)


def test_a_dead_server_never_fails_a_search(mem: mindfile.Mindfile) -> None:
    dead = OpenAICompatibleClient(
        "http://127.0.0.1:9/v1", model="m", timeout=0.5, max_retries=0, backoff=0.01
    )
    with dead:
        hits = mem.search("where do I live?", top_k=3, rerank=llm_reranker(dead))
    assert len(hits) == 3
    assert hits.degraded is not None and hits.degraded.startswith("rerank unavailable")


def test_texts_are_cut_and_whitespace_collapsed() -> None:
    client = ScriptedChatClient([json.dumps({"scores": []})])
    ranker = llm_reranker(client, max_chars=12)
    assert ranker.score("q", ["one  two\nthree four five six", "short"]) == [-1.0, -1.0]
    user = client.calls[0]["messages"][-1]["content"]
    assert "[1] one two thre\n" in user and "[2] short\n" in user
    assert client.calls[0]["json_schema"] == RERANK_SCHEMA
    assert ranker.score("q", []) == []  # no call for no texts
    assert len(client.calls) == 1


def test_the_contract_errors_are_typed() -> None:
    with pytest.raises(InvalidInputError):
        llm_reranker(object())  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        llm_reranker(ScriptedChatClient([]), max_chars=0)
    ranker = llm_reranker(ScriptedChatClient([json.dumps({"scores": [{"id": 3, "score": 1}]})]))
    with pytest.raises(LLMError) as info:
        ranker.score("q", ["a", "b"])
    assert info.value.details["reason"] == "schema_invalid"
