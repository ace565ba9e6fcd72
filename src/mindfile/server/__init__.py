"""The HTTP API: ``mindfile serve`` (FastAPI + uvicorn, the ``server`` extra).

Install with ``pip install "mindfile[server]"``; docs/http.md lists every route. The
core ``import mindfile`` never imports this package (nor FastAPI).

>>> from mindfile.server import ServerSettings, create_app   # doctest: +SKIP
>>> app = create_app(ServerSettings(db_path="agent.db"))      # doctest: +SKIP
"""

from __future__ import annotations

try:
    import fastapi  # noqa: F401
    import uvicorn  # noqa: F401
except ModuleNotFoundError as exc:  # pragma: no cover - exercised without the extra
    from mindfile.errors import BackendUnavailableError

    raise BackendUnavailableError(
        f'the HTTP server needs {exc.name}: pip install "mindfile[server]"'
    ) from exc

from mindfile.server.app import DEFAULT_MAX_BODY_BYTES, ServerSettings, create_app
from mindfile.server.auth import (
    TOKEN_ENV,
    Authenticator,
    Principal,
    check_bind,
    load_tokens,
)
from mindfile.server.run import serve

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "TOKEN_ENV",
    "Authenticator",
    "Principal",
    "ServerSettings",
    "check_bind",
    "create_app",
    "load_tokens",
    "serve",
]
