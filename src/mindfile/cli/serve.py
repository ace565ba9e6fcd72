"""``mindfile serve``: the HTTP API over one store (docs/http.md).

FastAPI and uvicorn come with the ``server`` extra and are imported only when the
command runs, so ``mindfile`` works without them.
"""

from __future__ import annotations

import logging
from typing import Literal

import click

import mindfile
from mindfile.cli._common import (
    db_option,
    embedder_option,
    llm_reranker_from_env,
    rerank_option,
    run,
)

__all__ = ["serve"]


@click.command()
@db_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option("--uds", default=None, help="Listen on this Unix socket instead (mode 0600).")
@click.option(
    "--tokens",
    "tokens_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="JSON or TOML file mapping bearer tokens to users (several users).",
)
@click.option(
    "--user",
    default=None,
    help="The one user of a MINDFILE_API_TOKEN or unauthenticated server [default: default].",
)
@embedder_option
@click.option("--read-only", is_flag=True, help="Open the store read-only (writes: 409).")
@click.option(
    "--indexing",
    type=click.Choice(["sync", "background"]),
    default="sync",
    show_default=True,
    help="background: writes queue embedding jobs, run by a worker in the server.",
)
@click.option(
    "--max-body-mb",
    type=click.FloatRange(min=0.001),
    default=16.0,
    show_default=True,
    help="Larger request bodies are refused with 413.",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="Request worker threads [default: 4 per CPU, 4 to 32].",
)
@click.option("--public-metrics", is_flag=True, help="Serve /metrics without a token.")
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
)
@click.option("--no-access-log", is_flag=True, help="Do not log each request.")
@rerank_option
def serve(
    db_path: str,
    host: str,
    port: int,
    uds: str | None,
    tokens_file: str | None,
    user: str | None,
    embedder: str | None,
    read_only: bool,
    indexing: str,
    max_body_mb: float,
    threads: int | None,
    public_metrics: bool,
    log_level: str,
    no_access_log: bool,
    rerank_llm: bool,
) -> None:
    """Serve the store over HTTP (needs: pip install "mindfile[server]").

    Auth: MINDFILE_API_TOKEN=... for one user, --tokens FILE for several; without
    either, only 127.0.0.1 / ::1 / --uds are allowed. See docs/http.md.
    """
    with run():
        from mindfile.server import ServerSettings, check_bind
        from mindfile.server import serve as run_server
        from mindfile.server.app import default_threads
        from mindfile.server.run import resolve_auth

        auth = resolve_auth(tokens_file, user=user)
        check_bind(None if uds is not None else host, uds, auth)
        logging.basicConfig(
            level=log_level.upper(), format="%(levelname)s:     %(name)s: %(message)s"
        )
        mode: Literal["sync", "background"] = "background" if indexing == "background" else "sync"
        # Opened here, so a missing file or a wrong embedder is a one-line error and an
        # exit code; the server closes it at shutdown (before uvicorn re-raises SIGTERM).
        with llm_reranker_from_env(rerank_llm) as reranker:
            engine = mindfile.open(
                db_path, embedder=embedder, read_only=read_only, indexing=mode, reranker=reranker
            )
            try:
                settings = ServerSettings(
                    db_path=db_path,
                    auth=auth,
                    indexing=mode,
                    max_body_bytes=int(max_body_mb * 1024 * 1024),
                    threads=threads or default_threads(),
                    public_metrics=public_metrics,
                    engine=engine,
                    close_engine=True,
                )
                where = f"unix:{uds}" if uds is not None else f"http://{host}:{port}"
                click.echo(f"mindfile serve: {db_path} on {where}", err=True)
                run_server(
                    settings,
                    host=host,
                    port=port,
                    uds=uds,
                    log_level=log_level,
                    access_log=not no_access_log,
                )
            finally:
                engine.close()  # a no-op when the server closed it
