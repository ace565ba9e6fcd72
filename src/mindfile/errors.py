"""Mindfile's error tree. Every error Mindfile raises on purpose is an :class:`MindfileError`.

::

    MindfileError                      code            http  exit
    ├── ConfigError                  config          500   3
    │   └── UnsupportedBackendError  unsupported_backend 500 3
    ├── InvalidInputError            invalid_input   400   2
    │   └── LimitExceededError       limit_exceeded  413   2
    ├── NotFoundError                not_found       404   4
    ├── ConflictError                conflict        409   5
    ├── StorageError                 storage         500   6
    │   ├── SchemaError              schema          500   6
    │   ├── ReadOnlyError            read_only       409   6
    │   └── DatabaseConnectionError  db_connection   503   6
    ├── EmbeddingError               embedding       502   7
    ├── BackendUnavailableError      unavailable     503   8
    └── LLMError                     llm             502   9

``code`` is a stable wire name (HTTP bodies, tool results, ``--json`` CLI output); the
HTTP status and the CLI exit code travel with the class so every interface maps errors
the same way.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "BackendUnavailableError",
    "ConfigError",
    "ConflictError",
    "DatabaseConnectionError",
    "EmbeddingError",
    "InvalidInputError",
    "InvalidTimeError",
    "LLMError",
    "LimitExceededError",
    "MindfileError",
    "NotFoundError",
    "ReadOnlyError",
    "SchemaError",
    "ScopeError",
    "StorageError",
    "UnsupportedBackendError",
]


class MindfileError(Exception):
    """Root of every error Mindfile raises deliberately."""

    code: ClassVar[str] = "mindfile_error"
    http_status: ClassVar[int] = 500
    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form: ``{"error": code, "message": ..., "details": {...}}``."""
        out: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.details:
            out["details"] = {k: _jsonable(v) for k, v in self.details.items()}
        return out


class ConfigError(MindfileError):
    """Mindfile was configured in a way that cannot work (bad option, missing extra)."""

    code = "config"
    exit_code = 3


class UnsupportedBackendError(ConfigError):
    """The backend cannot do this: SQLite's ``Database`` given a ``postgresql://`` URL
    (``mindfile.open`` opens those; docs/postgres.md); ``details["scheme"]`` is the
    URL's scheme.
    """

    code = "unsupported_backend"


class InvalidInputError(MindfileError, ValueError):
    """An argument is malformed; nothing was written."""

    code = "invalid_input"
    http_status = 400
    exit_code = 2


class LimitExceededError(InvalidInputError):
    """An input is over a documented limit (scratchpad size, tag count, quota...)."""

    code = "limit_exceeded"
    http_status = 413


class InvalidTimeError(InvalidInputError):
    """A time argument (``occurred_at``, ``as_of``) is not a time: not a datetime, a
    date, an ISO-8601 string or finite epoch seconds (docs/retrieval.md)."""

    code = "invalid_time"


class NotFoundError(MindfileError, LookupError):
    """The addressed session, note, fact or schedule does not exist."""

    code = "not_found"
    http_status = 404
    exit_code = 4


class ConflictError(MindfileError):
    """The write conflicts with the stored state (non-monotonic sequence, stale epoch...)."""

    code = "conflict"
    http_status = 409
    exit_code = 5


class ScopeError(ConflictError):
    """A session is used under another user or channel than the one it belongs to.

    A session's ``user_id`` and ``channel`` are fixed once set (docs/privacy.md);
    passing a different one is refused rather than mixing two users' memory.
    """

    code = "scope_conflict"


class StorageError(MindfileError):
    """The database refused an operation (I/O error, corruption, lock time-out)."""

    code = "storage"
    exit_code = 6


class SchemaError(StorageError):
    """The database schema is newer than this Mindfile, or an applied migration was edited."""

    code = "schema"


class ReadOnlyError(StorageError):
    """A write on a store opened with ``read_only=True`` (or on read-only media)."""

    code = "read_only"
    http_status = 409


class DatabaseConnectionError(StorageError):
    """A database server (Postgres) could not be reached or refused the connection.

    The message names the host and database, never the password (docs/postgres.md).
    """

    code = "db_connection"
    http_status = 503


class EmbeddingError(MindfileError):
    """The embedder failed or returned vectors of the wrong shape."""

    code = "embedding"
    http_status = 502
    exit_code = 7


class BackendUnavailableError(MindfileError):
    """An optional backend or provider is not installed or cannot be reached."""

    code = "unavailable"
    http_status = 503
    exit_code = 8


class LLMError(MindfileError):
    """A language-model call failed: transport, HTTP status, or an answer that broke its contract.

    ``details["reason"]`` says which (``timeout``, ``connection``, ``http_status``,
    ``malformed_json``, ``schema_invalid``...); see ``docs/llm.md``.
    """

    code = "llm"
    http_status = 502
    exit_code = 9


def _jsonable(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)
