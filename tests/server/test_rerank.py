"""A server started with a reranker: HTTP searches and contexts use it, a request can
turn it off, and ``--rerank-llm`` without its variables is a one-line config error."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import httpx
from click.testing import CliRunner

import mindfile
from mindfile.cli.main import cli
from mindfile.errors import ConfigError
from mindfile.server import ServerSettings

from ._support import LiveServer


class Reverse:
    """Scores the fused order backwards (the last hit first)."""

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [float(i) for i in range(len(texts))]


def test_http_search_uses_the_servers_reranker(tmp_path: Path) -> None:
    with mindfile.open(tmp_path / "r.db", embedder="hash", lexical_index="fts5") as mem:
        mem.store_many(
            [("s", i, f"the garden needs water, note {i}") for i in range(5)], user_id="default"
        )
        fused = [h.text for h in mem.search("garden water", top_k=5)]
        mem.reranker = Reverse()
        with LiveServer(ServerSettings(engine=mem)) as live, httpx.Client() as client:
            got = client.post(live.url + "/v1/search", json={"query": "garden water", "top_k": 5})
            assert got.status_code == 200, got.text
            body = got.json()
            assert [h["text"] for h in body["hits"]] == fused[::-1]
            assert [h["breakdown"]["rerank"] for h in body["hits"]] == [4.0, 3.0, 2.0, 1.0, 0.0]
            off = client.post(
                live.url + "/v1/search",
                json={"query": "garden water", "top_k": 5, "rerank": False},
            ).json()
            assert [h["text"] for h in off["hits"]] == fused
            assert all(h["breakdown"]["rerank"] is None for h in off["hits"])
            ctx = client.post(
                live.url + "/v1/context",
                json={
                    "session_id": "s",
                    "query": "garden water",
                    "token_budget": 2000,
                    "config": {"rerank": False},
                },
            )
            assert ctx.status_code == 200, ctx.text


def test_rerank_llm_needs_its_variables(tmp_path: Path) -> None:
    env = {"MINDFILE_API_TOKEN": "", "MINDFILE_LLM_BASE_URL": "", "MINDFILE_LLM_MODEL": ""}
    args = ["serve", "--db", str(tmp_path / "x.db"), "--rerank-llm"]
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == ConfigError.exit_code, result.output
    assert "MINDFILE_LLM_BASE_URL" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "x.db").exists()  # refused before opening the store
    result = CliRunner().invoke(
        cli, ["mcp", "--db", str(tmp_path / "y.db"), "--rerank-llm"], env=env
    )
    assert result.exit_code == ConfigError.exit_code, result.output
    assert not (tmp_path / "y.db").exists()
