"""A store closes the provider it built from a spec, never one it was given."""

from __future__ import annotations

from pathlib import Path

import pytest

import mindfile
from mindfile.embed.remote import OpenAIEmbedder

from ._server import KEY, EmbeddingServer


def test_close_releases_only_what_the_store_made(
    tmp_path: Path, server: EmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    mem = mindfile.open(tmp_path / "a.db", embedder=f"openai:test-embed@{server.dims}")
    made = mem.embedder
    assert isinstance(made, OpenAIEmbedder)
    mem.store("chat", 1, "hello")
    mem.close()
    assert made._http._http.is_closed  # the pool the store opened is released

    given = OpenAIEmbedder(
        "test-embed", base_url=server.url + "/v1", api_key=KEY, dimensions=server.dims
    )
    with mindfile.open(tmp_path / "b.db", embedder=given) as mem:
        mem.store("chat", 1, "hello")
    assert not given._http._http.is_closed  # the caller's embedder stays usable
    assert given.embed_documents(["still works"]).shape == (1, server.dims)
    given.close()
