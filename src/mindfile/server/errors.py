"""HTTP error bodies: ``{"error": {"code", "message"}}`` with the error's own status.

Every :class:`~mindfile.errors.MindfileError` keeps its ``code`` and ``http_status``
(``invalid_input`` 400, ``not_found`` 404, ``conflict`` 409, ``limit_exceeded`` 413...).
The HTTP layer adds what only it has: ``unauthorized`` (401), ``forbidden`` (403),
``method_not_allowed`` (405) and ``internal`` (500, no details; the traceback goes to
the server log). A :class:`~mindfile.errors.ScopeError` about a session of another user
becomes a plain 404 ``not_found``, worded exactly like a missing session, so a client
cannot tell the two apart (docs/http.md "Users").
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from mindfile.errors import NotFoundError
from mindfile.server.auth import ForbiddenError, UnauthorizedError

__all__ = [
    "ForbiddenError",
    "UnauthorizedError",
    "error_body",
    "error_response",
    "no_session",
]


def no_session(session_id: str) -> NotFoundError:
    """The one error for a session that is missing *or* belongs to another user."""
    return NotFoundError(f"no session {session_id!r}", session_id=session_id)


def error_body(code: str, message: str) -> dict[str, Any]:
    """The JSON body of every error response."""
    return {"error": {"code": code, "message": message}}


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An error response; 401s carry ``WWW-Authenticate: Bearer``."""
    if status == 401:
        headers = {"WWW-Authenticate": "Bearer", **(headers or {})}
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)
