"""The OpenAI-compatible client against a real loopback server: wire format, retries,
time-outs, secrets, and the strict JSON contract."""

from __future__ import annotations

import json
import logging
import socket
import sys
import time
from typing import Any

import pytest

import mindfile
from mindfile.errors import BackendUnavailableError, ConfigError, InvalidInputError, LLMError
from mindfile.llm import (
    ChatClient,
    ChatResponse,
    OpenAICompatibleClient,
    ScriptedChatClient,
    complete_json,
    parse_json_reply,
)

from ._server import API_KEY, FakeOpenAIServer, Reply, chat, chat_json

MSGS = [{"role": "user", "content": "Say hi."}]
SCHEMA: dict[str, Any] = {
    "title": "greeting",
    "type": "object",
    "properties": {"greeting": {"type": "string", "minLength": 1}, "n": {"type": "integer"}},
    "required": ["greeting"],
    "additionalProperties": False,
}


def make_client(server: FakeOpenAIServer, **options: Any) -> OpenAICompatibleClient:
    opts: dict[str, Any] = {"model": "test-model", "backoff": 0.01, "max_backoff": 0.05}
    opts.update(options)
    return OpenAICompatibleClient(server.base_url, **opts)


def assert_no_secret(err: LLMError) -> None:
    for text in (str(err), repr(err), json.dumps(err.to_dict())):
        assert API_KEY not in text


# -- the wire ------------------------------------------------------------------------------


def test_success_returns_the_answer_and_sends_an_openai_request(
    llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer
) -> None:
    llm_server.script(chat("hi there"))
    response = llm.complete(MSGS, temperature=0.3, max_tokens=50)
    assert response == ChatResponse("hi there", "test-model", "stop", 11, 7, attempts=1)
    assert response.to_dict()["content"] == "hi there"
    [req] = llm_server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {API_KEY}"
    assert req.headers["content-type"] == "application/json"
    assert req.body == {
        "model": "test-model",
        "messages": MSGS,
        "temperature": 0.3,
        "max_tokens": 50,
    }


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("schema", {"type": "json_schema"}),
        ("object", {"type": "json_object"}),
        ("prompt", None),
    ],
)
def test_json_mode_decides_the_response_format(
    llm_server: FakeOpenAIServer, mode: str, expected: dict[str, Any] | None
) -> None:
    llm_server.script(chat_json({"greeting": "hi"}))
    with make_client(llm_server, json_mode=mode) as client:
        assert client.complete_json(MSGS, schema=SCHEMA) == {"greeting": "hi"}
    body = llm_server.requests[0].body
    if expected is None:
        assert "response_format" not in body
    else:
        assert body["response_format"]["type"] == expected["type"]
    if mode == "schema":
        spec = body["response_format"]["json_schema"]
        assert spec == {"name": "greeting", "schema": SCHEMA, "strict": False}


def test_content_parts_are_joined(
    llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer
) -> None:
    llm_server.script(chat([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]))
    assert llm.complete(MSGS).content == "ab"


# -- retries -------------------------------------------------------------------------------


def test_5xx_is_retried_until_success(
    llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer
) -> None:
    llm_server.script(Reply(status=500), Reply(status=503), chat("finally"))
    response = llm.complete(MSGS)
    assert response.content == "finally" and response.attempts == 3
    assert len(llm_server.requests) == 3


def test_gives_up_after_max_retries_with_details(
    llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer
) -> None:
    llm_server.script(*[Reply(status=502, body="bad gateway")] * 5)
    with pytest.raises(LLMError) as info:
        llm.complete(MSGS)
    assert len(llm_server.requests) == 3  # 1 + max_retries
    d = info.value.details
    assert d["reason"] == "http_status" and d["status"] == 502 and d["attempts"] == 3
    assert d["body"] == "bad gateway" and d["model"] == "test-model"
    assert d["url"] == llm_server.base_url + "/chat/completions"
    assert info.value.code == "llm" and info.value.http_status == 502


def test_no_retries_when_max_retries_is_zero(llm_server: FakeOpenAIServer) -> None:
    llm_server.script(Reply(status=500), chat("never reached"))
    with make_client(llm_server, max_retries=0) as client, pytest.raises(LLMError):
        client.complete(MSGS)
    assert len(llm_server.requests) == 1


def test_429_waits_as_long_as_retry_after_says(llm_server: FakeOpenAIServer) -> None:
    llm_server.script(Reply(status=429, headers={"Retry-After": "1"}), chat("ok"))
    with make_client(llm_server, backoff=0.001, max_backoff=5.0) as client:
        start = time.monotonic()
        assert client.complete(MSGS).attempts == 2
        assert time.monotonic() - start >= 0.9


def test_retry_after_is_capped_by_max_backoff(llm_server: FakeOpenAIServer) -> None:
    llm_server.script(Reply(status=429, headers={"Retry-After": "3600"}), chat("ok"))
    with make_client(llm_server, max_backoff=0.05) as client:
        start = time.monotonic()
        assert client.complete(MSGS).content == "ok"
        assert time.monotonic() - start < 2


def test_backoff_grows_exponentially(llm_server: FakeOpenAIServer) -> None:
    llm_server.script(Reply(status=500), Reply(status=500), chat("ok"))
    with make_client(llm_server, backoff=0.1, max_backoff=1.0) as client:
        start = time.monotonic()
        client.complete(MSGS)
        assert time.monotonic() - start >= 0.3  # 0.1 then 0.2 (plus jitter)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_is_final_at_once(
    llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer, status: int
) -> None:
    llm_server.script(
        Reply(status=status, body={"error": {"message": "context too long"}}), chat("no")
    )
    with pytest.raises(LLMError) as info:
        llm.complete(MSGS)
    assert len(llm_server.requests) == 1
    assert info.value.details["status"] == status and info.value.details["attempts"] == 1
    assert "context too long" in info.value.details["body"]


def test_time_out_is_retried_then_reported(llm_server: FakeOpenAIServer) -> None:
    llm_server.script(Reply(delay=10), Reply(delay=10))
    with make_client(llm_server, timeout=0.25, max_retries=1) as client:
        start = time.monotonic()
        with pytest.raises(LLMError) as info:
            client.complete(MSGS)
        assert time.monotonic() - start < 3
    assert info.value.details["reason"] == "timeout" and info.value.details["attempts"] == 2
    assert len(llm_server.requests) == 2


def test_connection_refused_is_retried_then_reported() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OpenAICompatibleClient(
        f"http://127.0.0.1:{port}/v1", model="m", max_retries=2, backoff=0.01
    )
    with client, pytest.raises(LLMError) as info:
        client.complete(MSGS)
    assert info.value.details["reason"] == "connection" and info.value.details["attempts"] == 3


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(body="<html>proxy error</html>"), "bad_response"),
        (Reply(body={"choices": []}), "bad_response"),
        (chat(None), "empty"),
    ],
)
def test_a_broken_envelope_is_final(
    llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer, reply: Reply, reason: str
) -> None:
    llm_server.script(reply, chat("never reached"))
    with pytest.raises(LLMError) as info:
        llm.complete(MSGS)
    assert info.value.details["reason"] == reason and len(llm_server.requests) == 1


def test_a_refusal_is_an_error(llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer) -> None:
    reply = chat(None)
    reply.body["choices"][0]["message"]["refusal"] = "I can't help with that."
    llm_server.script(reply)
    with pytest.raises(LLMError) as info:
        llm.complete(MSGS)
    assert info.value.details["reason"] == "refusal"


# -- secrets -------------------------------------------------------------------------------


def test_the_key_is_never_in_repr_errors_or_logs(
    llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    assert API_KEY not in repr(llm) and "api_key='***'" in repr(llm)
    echo = {"error": f"bad key {API_KEY}; header was 'Authorization: Bearer {API_KEY}'"}
    llm_server.script(Reply(status=500, body=echo), Reply(status=401, body=echo))
    with caplog.at_level(logging.DEBUG, logger="mindfile.llm"), pytest.raises(LLMError) as info:
        llm.complete(MSGS)
    assert info.value.details["status"] == 401
    assert "***" in info.value.details["body"]
    assert_no_secret(info.value)
    assert caplog.records and API_KEY not in caplog.text


def test_key_from_the_environment(
    llm_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINDFILE_LLM_API_KEY", "env-key")
    monkeypatch.setenv("OPENAI_API_KEY", "openai-key")
    llm_server.script(chat("a"), chat("b"))
    with make_client(llm_server) as client:
        client.complete(MSGS)
    monkeypatch.delenv("MINDFILE_LLM_API_KEY")
    with make_client(llm_server) as client:  # an OpenAI key is never sent to other hosts
        client.complete(MSGS)
    first, second = llm_server.requests
    assert first.headers["authorization"] == "Bearer env-key"
    assert "authorization" not in second.headers


def test_an_empty_key_sends_none(
    llm_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINDFILE_LLM_API_KEY", "env-key")
    llm_server.script(chat("a"))
    with make_client(llm_server, api_key="") as client:
        assert "api_key=None" in repr(client)
        client.complete(MSGS)
    assert "authorization" not in llm_server.requests[0].headers


def test_from_env(llm_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MINDFILE_LLM_BASE_URL", raising=False)
    with pytest.raises(ConfigError):
        OpenAICompatibleClient.from_env()
    monkeypatch.setenv("MINDFILE_LLM_BASE_URL", llm_server.base_url + "/")
    monkeypatch.setenv("MINDFILE_LLM_MODEL", "env-model")
    llm_server.script(chat("a"))
    with OpenAICompatibleClient.from_env(timeout=1.0) as client:
        assert client.base_url == llm_server.base_url and client.timeout == 1.0
        client.complete(MSGS)
    assert llm_server.requests[0].body["model"] == "env-model"


@pytest.mark.parametrize(
    "options",
    [
        {"base_url": "ftp://example.test/v1"},
        {"base_url": "not a url"},
        {"base_url": f"http://user:{API_KEY}@127.0.0.1/v1"},
        {"base_url": "http://127.0.0.1/v1?x=1"},
        {"model": " "},
        {"timeout": 0},
        {"timeout": float("inf")},
        {"max_retries": -1},
        {"max_retries": 11},
        {"backoff": -1},
        {"json_mode": "yaml"},
        {"api_key": f"{API_KEY}\nX-Evil: 1"},
    ],
)
def test_bad_configuration(options: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {"base_url": "http://127.0.0.1:1/v1", "model": "m"}
    kwargs.update(options)
    with pytest.raises(ConfigError) as info:
        OpenAICompatibleClient(kwargs.pop("base_url"), **kwargs)
    assert API_KEY not in str(info.value)


def test_bad_arguments_are_invalid_input(llm: OpenAICompatibleClient) -> None:
    bad: list[dict[str, Any]] = [{"temperature": 3}, {"max_tokens": 0}]
    for kwargs in bad:
        with pytest.raises(InvalidInputError):
            llm.complete(MSGS, **kwargs)
    for messages in ([], "hi", [{"content": "no role"}], [{"role": "user", "content": object()}]):
        with pytest.raises(InvalidInputError):
            llm.complete(messages)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        llm.complete(MSGS, json_schema={"type": "no-such-type"})


def test_missing_httpx_is_a_helpful_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(BackendUnavailableError, match=r"mindfile\[llm\]"):
        OpenAICompatibleClient("http://127.0.0.1:1/v1", model="m")


def test_llm_error_is_in_the_error_tree() -> None:
    assert issubclass(mindfile.LLMError, mindfile.MindfileError)
    assert (LLMError.code, LLMError.http_status, LLMError.exit_code) == ("llm", 502, 9)


def test_both_clients_satisfy_the_protocol(llm: OpenAICompatibleClient) -> None:
    assert isinstance(llm, ChatClient) and isinstance(ScriptedChatClient([]), ChatClient)


# -- the JSON contract ---------------------------------------------------------------------


def test_complete_json_returns_the_validated_object(
    llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer
) -> None:
    llm_server.script(chat('  {"greeting": "hello", "n": 2}\n'))
    assert llm.complete_json(MSGS, schema=SCHEMA) == {"greeting": "hello", "n": 2}


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"greeting": "hel', "malformed_json"),
        ('```json\n{"greeting": "hi"}\n```', "malformed_json"),
        ('{"greeting": "a"} trailing', "malformed_json"),
        ('{"greeting": "a", "greeting": "b"}', "malformed_json"),
        ('{"greeting": "a", "n": NaN}', "malformed_json"),
        ('["greeting"]', "not_an_object"),
        ('{"greeting": ""}', "schema_invalid"),
        ('{"greeting": "hi", "extra": 1}', "schema_invalid"),
        ('{"n": "two"}', "schema_invalid"),
    ],
)
def test_a_malformed_answer_is_an_error_with_the_raw_text(
    llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer, content: str, reason: str
) -> None:
    llm_server.script(chat(content))
    with pytest.raises(LLMError) as info:
        llm.complete_json(MSGS, schema=SCHEMA)
    details = info.value.details
    assert details["reason"] == reason and details["raw"] == content
    if reason == "schema_invalid":
        assert details["errors"] and all(e.startswith("$") for e in details["errors"])
    assert len(llm_server.requests) == 1  # a bad answer is not silently retried
    assert_no_secret(info.value)


def test_a_cut_off_answer_is_truncated_not_parsed(
    llm: OpenAICompatibleClient, llm_server: FakeOpenAIServer
) -> None:
    llm_server.script(chat('{"greeting": "hi"}', finish_reason="length"))
    with pytest.raises(LLMError) as info:
        llm.complete_json(MSGS, schema=SCHEMA)
    assert info.value.details["reason"] == "truncated"


def test_the_raw_text_in_an_error_is_truncated() -> None:
    raw = "x" * 10_000
    with pytest.raises(LLMError) as info:
        parse_json_reply(ChatResponse(raw, "m"), schema=SCHEMA)
    kept = info.value.details["raw"]
    assert kept.startswith("x" * 2000) and len(kept) < 2100 and "8000 more chars" in kept


def test_complete_json_works_with_any_chat_client() -> None:
    client = ScriptedChatClient(['{"greeting": "yo"}', "nope"])
    assert complete_json(client, MSGS, schema=SCHEMA) == {"greeting": "yo"}
    assert client.calls[0]["json_schema"] == SCHEMA
    with pytest.raises(LLMError):
        complete_json(client, MSGS, schema=SCHEMA)
    with pytest.raises(LLMError, match="no scripted reply"):
        client.complete(MSGS)


def test_the_package_surface_is_accurate_and_documented() -> None:
    import inspect

    import mindfile.llm

    assert mindfile.llm.__doc__
    for name in mindfile.llm.__all__:
        value = getattr(mindfile.llm, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), name
