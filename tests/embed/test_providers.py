"""Embedding providers against a real loopback server speaking their wire formats."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mindfile
from mindfile.embed import resolve_embedder
from mindfile.embed.base import normalize
from mindfile.embed.remote import (
    GeminiEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
    RemoteEmbedder,
    VoyageEmbedder,
)
from mindfile.errors import ConfigError, EmbeddingError

from ._server import KEY, EmbeddingServer, Failure

PROVIDERS = ["openai", "ollama", "gemini", "voyage"]
TEXTS = [f"text number {i} about lisbon" for i in range(10)]


def make(provider: str, server: EmbeddingServer, **options: Any) -> RemoteEmbedder:
    options = {"dimensions": server.dims, "backoff": 0.01, "max_backoff": 1.0, **options}
    if provider == "openai":
        return OpenAIEmbedder("test-embed", base_url=server.url + "/v1", api_key=KEY, **options)
    if provider == "ollama":
        return OllamaEmbedder("test-embed", base_url=server.url, **options)
    if provider == "gemini":
        return GeminiEmbedder("test-embed", base_url=server.url + "/v1beta", api_key=KEY, **options)
    return VoyageEmbedder("test-embed", base_url=server.url + "/v1", api_key=KEY, **options)


def expected(server: EmbeddingServer, texts: list[str]) -> np.ndarray:
    return normalize(server.hash.embed_documents(texts))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_batches_keep_their_order(provider: str, server: EmbeddingServer) -> None:
    emb = make(provider, server, batch_size=3, max_concurrency=3)
    vectors = emb.embed_documents(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (10, server.dims)
    np.testing.assert_allclose(vectors, expected(server, TEXTS), atol=1e-6)
    assert len(server.requests) == 4  # 3 + 3 + 3 + 1
    assert emb.model_id == f"{provider}/test-embed@{server.dims}"
    assert emb.local is False


@pytest.mark.parametrize("provider", PROVIDERS)
def test_auth_and_input_types(provider: str, server: EmbeddingServer) -> None:
    emb = make(provider, server)
    emb.embed_documents(["a document"])
    emb.embed_query("a query")
    doc, query = server.requests
    assert KEY not in doc.path and KEY not in query.path
    if provider in ("openai", "voyage"):
        assert doc.headers["authorization"] == f"Bearer {KEY}"
    elif provider == "gemini":
        assert doc.headers["x-goog-api-key"] == KEY
        assert doc.body["requests"][0]["taskType"] == "RETRIEVAL_DOCUMENT"
        assert query.body["requests"][0]["taskType"] == "RETRIEVAL_QUERY"
        assert doc.path == "/v1beta/models/test-embed:batchEmbedContents"
    else:
        assert "authorization" not in doc.headers
    if provider == "voyage":
        assert (doc.body["input_type"], query.body["input_type"]) == ("document", "query")


def test_openai_shortened_vectors_and_index_order(server: EmbeddingServer) -> None:
    emb = make("openai", server, dimensions=8)
    server.mode = "reversed"
    vectors = emb.embed_documents(TEXTS[:4])
    assert server.requests[0].body["dimensions"] == 8
    full = server.hash.embed_documents(TEXTS[:4])[:, :8]
    np.testing.assert_allclose(vectors, normalize(full), atol=1e-6)


def test_token_budget_splits_requests(server: EmbeddingServer) -> None:
    emb = make("openai", server, batch_size=100, max_batch_tokens=20)
    emb.embed_documents(["x" * 40] * 5)  # 10 tokens each: two per request
    assert sorted(len(r.body["input"]) for r in server.requests) == [1, 2, 2]


def test_429_with_retry_after_is_honoured(server: EmbeddingServer) -> None:
    emb = make("openai", server)
    server.failures.append(Failure(429, {"error": "slow down"}, {"Retry-After": "0.3"}))
    start = time.monotonic()
    vectors = emb.embed_documents(TEXTS[:2])
    assert time.monotonic() - start >= 0.3
    assert len(server.requests) == 2
    np.testing.assert_allclose(vectors, expected(server, TEXTS[:2]), atol=1e-6)


def test_5xx_is_retried_then_gives_up(server: EmbeddingServer) -> None:
    emb = make("voyage", server, max_retries=2)
    server.failures.append(Failure(503))
    assert emb.embed_documents(["x"]).shape == (1, server.dims)
    assert len(server.requests) == 2
    server.failures.extend([Failure(500)] * 3)
    with pytest.raises(EmbeddingError) as caught:
        emb.embed_documents(["y"])
    assert caught.value.details["reason"] == "http_status"
    assert caught.value.details["attempts"] == 3


def test_other_4xx_is_final(server: EmbeddingServer) -> None:
    emb = make("gemini", server)
    server.failures.append(Failure(400, {"error": {"message": "bad model"}}))
    with pytest.raises(EmbeddingError) as caught:
        emb.embed_documents(["x"])
    assert caught.value.details["status"] == 400 and len(server.requests) == 1


def test_timeouts(server: EmbeddingServer) -> None:
    emb = make("ollama", server, timeout=0.3, max_retries=1)
    server.failures.extend([Failure(200, delay=2.0), Failure(200, delay=2.0)])
    with pytest.raises(EmbeddingError) as caught:
        emb.embed_documents(["x"])
    assert caught.value.details["reason"] == "timeout"


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("garbage", "bad_response"),
        ("short", "wrong_dimensions"),
        ("nan", "not_finite"),
        ("fewer", "wrong_count"),
    ],
)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_bad_answers_are_typed_errors(
    provider: str, mode: str, reason: str, server: EmbeddingServer
) -> None:
    emb = make(provider, server, max_retries=0)
    server.mode = mode
    with pytest.raises(EmbeddingError) as caught:
        emb.embed_documents(TEXTS[:3])
    assert caught.value.details["reason"] == reason
    assert caught.value.code == "embedding"


def test_the_key_never_shows(server: EmbeddingServer, caplog: pytest.LogCaptureFixture) -> None:
    emb = make("openai", server, max_retries=1)
    server.failures.extend(
        [Failure(500, {"error": f"key {KEY} rejected"}), Failure(401, {"error": f"bad {KEY}"})]
    )
    with caplog.at_level(logging.DEBUG), pytest.raises(EmbeddingError) as caught:
        emb.embed_documents(["x"])
    shown = [repr(emb), str(caught.value), repr(caught.value.details), caplog.text]
    assert caplog.records  # the retry was logged
    assert all(KEY not in text for text in shown)
    assert "***" in repr(emb)


def test_specs_and_environment(server: EmbeddingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    emb = resolve_embedder("openai:text-embedding-3-small")
    assert emb.model_id == "openai/text-embedding-3-small@1536"  # known, no call needed
    assert server.requests == []
    short = resolve_embedder("openai:custom-model@16")
    short.embed_documents(["x"])
    assert server.requests[-1].body["dimensions"] == 16
    monkeypatch.setenv("OLLAMA_HOST", server.url.removeprefix("http://"))
    asked = len(server.requests)
    with pytest.raises(ConfigError, match="@768"):
        resolve_embedder("ollama:my-model")  # unknown size: asked for, never probed
    assert len(server.requests) == asked
    sized = resolve_embedder(f"ollama:my-model:latest@{server.dims}")
    assert sized.model_id == f"ollama/my-model@{server.dims}"  # ':latest' is the same model
    sized.embed_documents(["x"])
    assert server.requests[-1].path == "/api/embed"
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        resolve_embedder("openai:text-embedding-3-small")  # api.openai.com needs a key
    for bad in ("openai:", "voyage:voyage-3@x", "gemini:m@0"):
        with pytest.raises(ConfigError):
            resolve_embedder(bad)


def test_a_store_on_a_remote_embedder(tmp_path: Path, server: EmbeddingServer) -> None:
    path = tmp_path / "m.db"
    emb = make("openai", server)
    with mindfile.open(path, embedder=emb) as mem:
        mem.store("chat", 1, "I moved to Lisbon in May")
        mem.store("chat", 2, "My sister lives in Porto")
        query = emb.embed_documents(["I moved to Lisbon in May"])[0].tolist()
        hit = mem.search("x", mode="vector", top_k=1, query_embedding=query)[0]
        assert hit.text == "I moved to Lisbon in May"
        assert mem.search("Porto", top_k=1, mode="fts")[0].text == "My sister lives in Porto"
        assert mem.info().embedding_model == "openai/test-embed@16"
    with pytest.raises(ConfigError, match="openai/test-embed@16"):
        mindfile.open(path)  # a remote embedder is never rebuilt implicitly
    with mindfile.open(path, embedder=make("openai", server)) as mem:
        assert len(mem.recall("chat")) == 2


def test_a_failing_provider(tmp_path: Path, server: EmbeddingServer) -> None:
    emb = make("openai", server, max_retries=0)
    with mindfile.open(tmp_path / "sync.db", embedder=emb) as mem:
        server.failures.append(Failure(503))
        with pytest.raises(EmbeddingError):
            mem.store("chat", 1, "never half-written")
        assert mem.recall("chat") == []
    # A background store keeps the write; the job waits for the provider.
    with mindfile.open(tmp_path / "bg.db", embedder=emb, indexing="background") as mem:
        server.failures.extend([Failure(503)] * 20)  # down
        mem.store("chat", 1, "kept while the provider is down")
        mem.store_note("memory:al", "n1", "a note too")
        report = mem.run_jobs()
        assert report.succeeded == 0 and report.retried >= 1
        assert mem.job_status().pending == 2
        server.failures.clear()  # back up
        assert mem.search("provider", top_k=1, mode="fts")[0].text.startswith("kept")
        mem.db.execute("UPDATE memory_jobs SET next_retry_at = '0'")
        assert mem.run_jobs().succeeded == 2


def test_an_environment_key_only_goes_where_the_environment_points(
    server: EmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    d = server.dims
    local = OpenAIEmbedder("text-embedding-3-small", base_url=server.url + "/v1", dimensions=d)
    local.embed_documents(["x"])
    assert "authorization" not in server.requests[-1].headers  # a code-given local URL
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    named = OpenAIEmbedder("text-embedding-3-small", dimensions=d)
    named.embed_documents(["x"])
    assert server.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    explicit = OpenAIEmbedder(
        "text-embedding-3-small", base_url=server.url + "/v1", api_key="k2", dimensions=d
    )
    explicit.embed_documents(["x"])
    assert server.requests[-1].headers["authorization"] == "Bearer k2"


def test_dimensions_are_sent_only_when_they_change_the_size(server: EmbeddingServer) -> None:
    native = OpenAIEmbedder(
        "text-embedding-ada-002", base_url=server.url + "/v1", api_key=KEY, dimensions=1536
    )
    assert native.dimensions == 1536
    server.mode = "ok"
    with pytest.raises(EmbeddingError):  # the test server's vectors are 16-d
        native.embed_documents(["x"])
    assert "dimensions" not in server.requests[-1].body


def test_strings_overflow_and_bad_indexes_are_refused(server: EmbeddingServer) -> None:
    from ._server import Failure

    emb = make("openai", server, max_retries=0)
    good = [[0.5] * server.dims]
    for body, reason in (
        ({"data": [{"index": 0, "embedding": ["0.5"] * server.dims}]}, "bad_response"),
        ({"data": [{"index": 0, "embedding": [1e300] * server.dims}]}, "not_finite"),
        (
            {"data": [{"index": 0, "embedding": good[0]}, {"index": 0, "embedding": good[0]}]},
            "bad_response",
        ),
    ):
        server.failures.append(Failure(200, body))
        with pytest.raises(EmbeddingError) as caught:
            emb.embed_documents(["a", "b"][: len(body["data"])])
        assert caught.value.details["reason"] == reason


def test_blank_texts_are_sent_as_a_space(server: EmbeddingServer) -> None:
    emb = make("openai", server)
    assert emb.embed_documents(["", "   "]).shape == (2, server.dims)
    assert server.requests[-1].body["input"] == [" ", " "]


def test_a_final_error_does_not_wait_for_other_batches(server: EmbeddingServer) -> None:
    from ._server import Failure

    emb = make("openai", server, batch_size=1, max_concurrency=2, max_backoff=30.0)
    server.failures.extend(
        [Failure(429, {"error": "slow"}, {"Retry-After": "20"}), Failure(400, {"error": "bad"})]
    )
    start = time.monotonic()
    with pytest.raises(EmbeddingError):
        emb.embed_documents(["one", "two"])
    assert time.monotonic() - start < 5


def test_ollama_host_without_a_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box")
    assert OllamaEmbedder("nomic-embed-text").base_url == "http://gpu-box:11434"
