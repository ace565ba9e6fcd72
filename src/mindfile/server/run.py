"""Running the server: auth from the environment or a tokens file, the bind check, uvicorn."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import stat
from collections.abc import Mapping
from pathlib import Path

import uvicorn

from mindfile.errors import ConfigError
from mindfile.server.app import ServerSettings, create_app
from mindfile.server.auth import (
    DEFAULT_USER,
    TOKEN_ENV,
    Authenticator,
    check_bind,
    load_tokens,
    summary,
)

__all__ = ["bind_unix_socket", "resolve_auth", "serve"]

logger = logging.getLogger("mindfile.server")


def resolve_auth(
    tokens_file: str | Path | None,
    *,
    user: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Authenticator:
    """The auth mode: ``--tokens FILE`` (several users), ``MINDFILE_API_TOKEN`` (one
    user, ``user``), or none (one user, loopback only). Both at once is an error."""
    env = os.environ if environ is None else environ
    token = env.get(TOKEN_ENV) or None
    if tokens_file is not None and token is not None:
        raise ConfigError(
            f"give either {TOKEN_ENV} (one user) or --tokens FILE (several users), not both"
        )
    if tokens_file is not None:
        if user is not None:
            logger.warning("--user is ignored with --tokens: each token names its user")
        return load_tokens(tokens_file)
    if token is not None:
        return Authenticator.single(token, user or DEFAULT_USER)
    return Authenticator.none(user or DEFAULT_USER)


def bind_unix_socket(path: str | Path) -> socket.socket:
    """A listening Unix socket at ``path`` that only this OS user can connect to (0600;
    uvicorn's own would be 0666). A stale socket file is replaced, any other file kept."""
    target = Path(path)
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISSOCK(target.lstat().st_mode):
            raise ConfigError(f"{str(target)!r} exists and is not a socket")
        target.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(target))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {str(target)!r}: {exc.strerror}") from exc
    finally:
        os.umask(old)
    os.chmod(target, 0o600)
    sock.listen(2048)
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server, removing our Unix socket file on shutdown (uvicorn re-raises a
    caught SIGTERM after shutting down, so code after ``run()`` may never run)."""

    def __init__(self, config: uvicorn.Config, socket_path: str | None) -> None:
        super().__init__(config)
        self.socket_path = socket_path

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().shutdown(sockets=sockets)
        finally:
            if self.socket_path is not None:
                with contextlib.suppress(FileNotFoundError):
                    Path(self.socket_path).unlink()


def serve(
    settings: ServerSettings,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    uds: str | None = None,
    log_level: str = "info",
    access_log: bool = True,
) -> None:
    """Serve until interrupted (Ctrl-C / SIGTERM): refuses a non-loopback ``host``
    without auth, opens the store, closes it on the way out."""
    check_bind(None if uds is not None else host, uds, settings.auth)
    logger.info("auth: %s", summary(settings.auth))
    if uds is not None and settings.loopback_hosts_only is None:
        # A browser cannot reach a Unix socket; its clients send any Host.
        settings = dataclasses.replace(settings, loopback_hosts_only=False)
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=access_log,
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=10,
    )
    server = _Server(config, uds)
    if uds is None:
        server.run()
        return
    sock = bind_unix_socket(uds)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        with contextlib.suppress(FileNotFoundError):  # e.g. the store failed to open
            Path(uds).unlink()
