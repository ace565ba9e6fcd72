"""Bearer-token authentication: who a request is, and which user's memory it may touch.

Three modes (docs/http.md "Auth"):

* **single user**: ``MINDFILE_API_TOKEN`` holds one token; every request made with it is
  the server's one user (``--user``, default ``"default"``);
* **multi-user**: ``--tokens FILE`` maps each token to ``{"user": id, "agents": [...]}``
  (JSON or TOML); a request is confined to its token's user;
* **none**: no token at all, every request is the one user. Only allowed on a loopback
  address or a Unix socket (:func:`check_bind`).

Tokens are kept as SHA-256 digests and compared with :func:`hmac.compare_digest`
against every known digest (no early exit), so the time taken does not depend on how
much of a token was right nor on which token matched. Tokens are never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mindfile.errors import ConfigError, InvalidInputError, MindfileError
from mindfile.index.pipeline import check_id

__all__ = [
    "DEFAULT_USER",
    "MIN_TOKEN_CHARS",
    "TOKEN_ENV",
    "Authenticator",
    "ForbiddenError",
    "Principal",
    "UnauthorizedError",
    "check_bind",
    "is_loopback",
    "load_tokens",
    "summary",
]

log = logging.getLogger("mindfile.server")

#: The environment variable holding the single-user token.
TOKEN_ENV = "MINDFILE_API_TOKEN"
#: The user of a single-user (or unauthenticated loopback) server unless ``--user`` says.
DEFAULT_USER = "default"
#: Shorter tokens are refused: a bearer token is a password that never expires.
MIN_TOKEN_CHARS = 16


class UnauthorizedError(MindfileError):
    """No bearer token, or one the server does not know (HTTP 401)."""

    code = "unauthorized"
    http_status = 401


class ForbiddenError(MindfileError):
    """A known token asked for what it may not do, e.g. act as another agent (HTTP 403)."""

    code = "forbidden"
    http_status = 403


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the user whose memory every engine call is confined to.

    ``agents`` is empty when the token may act as any agent identity, else the agent
    identities it may name (the first is used when a request names none).
    """

    user_id: str
    agents: tuple[str, ...] = ()

    def agent(self, requested: str | None) -> str | None:
        """The agent identity a request runs as; :class:`ForbiddenError` if not allowed."""
        if requested is None:
            return self.agents[0] if self.agents else None
        if self.agents and requested not in self.agents:
            raise ForbiddenError(f"this token may not act as agent {requested!r}")
        return requested


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def _check_token(token: Any, where: str) -> str:
    if not isinstance(token, str) or not token.strip():
        raise ConfigError(f"{where}: a token must be a non-empty string")
    if token != token.strip() or any(c.isspace() for c in token):
        raise ConfigError(f"{where}: a token must not contain whitespace")
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"{where}: tokens must be at least {MIN_TOKEN_CHARS} characters")
    if not token.isascii():
        raise ConfigError(f"{where}: tokens must be ASCII (they travel in an HTTP header)")
    return token


def _check_user(user: Any, where: str) -> str:
    try:
        return check_id(user, "user")
    except InvalidInputError as exc:
        raise ConfigError(f"{where}: {exc.message}") from exc


class Authenticator:
    """Maps a bearer token to its :class:`Principal`, in constant time.

    ``Authenticator.none(user)`` accepts every request (no auth configured) as ``user``.
    """

    def __init__(self, entries: Mapping[str, Principal] | None) -> None:
        self.required = entries is not None
        self._entries: list[tuple[bytes, Principal]] = [
            (_digest(token), principal) for token, principal in (entries or {}).items()
        ]
        self._anonymous: Principal | None = None

    @classmethod
    def none(cls, user_id: str = DEFAULT_USER) -> Authenticator:
        """No authentication: every request is ``user_id`` (loopback and sockets only)."""
        auth = cls(None)
        auth._anonymous = Principal(_check_user(user_id, "--user"))
        return auth

    @classmethod
    def single(cls, token: str, user_id: str = DEFAULT_USER) -> Authenticator:
        """One token, one user."""
        return cls({_check_token(token, TOKEN_ENV): Principal(_check_user(user_id, "--user"))})

    @property
    def users(self) -> list[str]:
        """The distinct users tokens map to (for the startup log line; no tokens)."""
        if self._anonymous is not None:
            return [self._anonymous.user_id]
        return sorted({p.user_id for _, p in self._entries})

    def authenticate(self, authorization: str | None) -> Principal | None:
        """The principal of an ``Authorization`` header value, or None (reject: 401)."""
        if not self.required:
            return self._anonymous
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        candidate = _digest(token)
        found: Principal | None = None
        for digest, principal in self._entries:  # every entry, whatever matched
            if hmac.compare_digest(digest, candidate) and found is None:
                found = principal
        return found


def load_tokens(path: str | Path) -> Authenticator:
    """Read a tokens file (JSON, or TOML when it ends in ``.toml``).

    The document is a mapping ``token -> {"user": id, "agents": [ids...]}`` (``agents``
    optional), at the top level or under a ``"tokens"`` key. A bare string value is
    taken as the user id. Raises :class:`ConfigError` on any problem, naming the file
    but never a token.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the tokens file {str(file)!r}: {exc.strerror}") from exc
    try:
        if file.suffix.lower() == ".toml":
            doc: Any = tomllib.loads(text)
        else:
            doc = json.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        kind = "TOML" if file.suffix.lower() == ".toml" else "JSON"
        raise ConfigError(f"the tokens file {str(file)!r} is not valid {kind}: {exc}") from exc
    if isinstance(doc, Mapping) and isinstance(doc.get("tokens"), Mapping):
        doc = doc["tokens"]
    if not isinstance(doc, Mapping) or not doc:
        raise ConfigError(f"the tokens file {str(file)!r} must map tokens to users")
    entries: dict[str, Principal] = {}
    for n, (token, spec) in enumerate(doc.items(), start=1):
        where = f"{file.name}, entry {n}"
        _check_token(token, where)
        entries[token] = _principal(spec, where)
    _warn_if_readable(file)
    return Authenticator(entries)


def _principal(spec: Any, where: str) -> Principal:
    if isinstance(spec, str):
        return Principal(_check_user(spec, where))
    if not isinstance(spec, Mapping):
        raise ConfigError(f'{where}: expected {{"user": ..., "agents": [...]}}')
    unknown = set(spec) - {"user", "agents"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    agents = spec.get("agents", [])
    if isinstance(agents, str) or not isinstance(agents, Sequence):
        raise ConfigError(f"{where}: agents must be a list of agent ids")
    checked: list[str] = []
    for agent in agents:
        try:
            checked.append(check_id(agent, "agent"))
        except InvalidInputError as exc:
            raise ConfigError(f"{where}: {exc.message}") from exc
    return Principal(_check_user(spec.get("user"), where), tuple(checked))


def _warn_if_readable(file: Path) -> None:
    try:
        mode = file.stat().st_mode
    except OSError:  # pragma: no cover - it was just read
        return
    if os.name == "posix" and mode & 0o077:
        log.warning(
            "the tokens file %s is readable by other users (mode %o); chmod 600 it",
            file,
            mode & 0o777,
        )


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def check_bind(host: str | None, uds: str | None, auth: Authenticator) -> None:
    """:class:`ConfigError` when the server would listen beyond this machine without auth."""
    if auth.required or uds is not None:
        return
    if host is not None and not is_loopback(host):
        raise ConfigError(
            f"refusing to listen on {host!r} without authentication: anyone who can reach "
            f"it could read and erase every memory. Set {TOKEN_ENV} (one user) or pass "
            "--tokens FILE (several users), or bind 127.0.0.1 / a Unix socket (--uds)."
        )


def summary(auth: Authenticator) -> str:
    """A log line describing the auth mode (users, never tokens)."""
    if not auth.required:
        return f"no authentication (loopback only), user {auth.users[0]!r}"
    users: Sequence[str] = auth.users
    shown = ", ".join(repr(u) for u in users[:5]) + (", ..." if len(users) > 5 else "")
    return f"bearer tokens for {len(users)} user(s): {shown}"
