"""``mindfile mcp``: serve the memory tools to an MCP host (docs/mcp.md)."""

from __future__ import annotations

import asyncio
import ipaddress

import click

import mindfile
from mindfile.cli._common import (
    db_option,
    embedder_option,
    llm_reranker_from_env,
    rerank_option,
    run,
)
from mindfile.errors import ConfigError

__all__ = ["mcp"]


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command("mcp")
@db_option
@embedder_option
@click.option(
    "--user",
    "user_id",
    envvar="MINDFILE_USER",
    default="default",
    show_default=True,
    help="The one user this server serves (env MINDFILE_USER).",
)
@click.option("--session", "session_id", default=None, help="Session id (default mcp:USER).")
@click.option(
    "--transport",
    type=click.Choice(["stdio", "streamable-http"]),
    default="stdio",
    show_default=True,
)
@click.option("--host", default="127.0.0.1", show_default=True, help="streamable-http only.")
@click.option("--port", type=int, default=8766, show_default=True, help="streamable-http only.")
@rerank_option
def mcp(
    db_path: str,
    embedder: str | None,
    user_id: str,
    session_id: str | None,
    transport: str,
    host: str,
    port: int,
    rerank_llm: bool,
) -> None:
    """Serve the memory tools over MCP (stdio for desktop hosts, or streamable HTTP)."""
    from mindfile import mcp_server

    with run():
        if transport == "streamable-http" and not _loopback(host):
            raise ConfigError(
                f"refusing to serve MCP on {host}: the MCP endpoint has no authentication; "
                "bind to 127.0.0.1 (or put it behind an authenticating proxy on loopback)"
            )
        session = session_id or f"mcp:{user_id}"
        with (
            llm_reranker_from_env(rerank_llm) as reranker,
            mindfile.open(db_path, embedder=embedder, reranker=reranker) as mem,
        ):
            if transport == "stdio":
                asyncio.run(mcp_server.run_stdio(mem, user_id=user_id, session_id=session))
                return
            import uvicorn

            app = mcp_server.streamable_http_app(
                mem, user_id=user_id, session_id=session, host=host
            )
            click.echo(f"MCP (streamable HTTP) on http://{host}:{port}/mcp", err=True)
            uvicorn.run(app, host=host, port=port, log_level="warning")
