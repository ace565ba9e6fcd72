"""One HTTP policy for every remote call: the LLM client and the embedding providers.

:class:`JsonPoster` POSTs a JSON body with httpx (an optional dependency, imported on
first use) and applies the failure policy both documents describe (docs/llm.md,
docs/embeddings.md):

* each attempt has ``timeout`` seconds; connect errors, time-outs, dropped connections,
  429 and 5xx answers are retried up to ``max_retries`` times with exponential backoff
  (``backoff * 2**n``, a little jitter, at most ``max_backoff``); a ``Retry-After``
  header replaces the computed delay, capped at ``max_backoff``;
* any other 4xx is final at once;
* the secret (API key) never appears in ``repr()``, log records, or error text.

A final failure is an :class:`HttpFailure` (``reason``: ``timeout``, ``connection``,
``transport`` or ``http_status``); callers turn it into their own typed error.
"""

from __future__ import annotations

import email.utils
import importlib
import logging
import math
import random
import re
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mindfile.errors import BackendUnavailableError, ConfigError

if TYPE_CHECKING:
    import httpx

__all__ = [
    "HttpFailure",
    "JsonPoster",
    "check_base_url",
    "excerpt",
    "import_httpx",
    "positive",
    "retry_after",
]

EXCERPT_CHARS = 2000
MAX_RETRIES = 10
_BEARER = re.compile(r"(?i)(bearer\s+)\S+")


class HttpFailure(Exception):
    """A request that failed for good (after its retries); ``details`` for the error."""

    def __init__(self, reason: str, message: str, attempts: int, **details: Any) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.attempts = attempts
        self.details = details


class JsonPoster:
    """POST JSON with retries (module docstring). Thread-safe; close it when done."""

    def __init__(
        self,
        *,
        timeout: float,
        max_retries: int,
        backoff: float,
        max_backoff: float,
        headers: Mapping[str, str],
        secret: str | None,
        logger: logging.Logger,
        extra: str,
    ) -> None:
        hx = import_httpx(extra)
        self.timeout = positive(timeout, "timeout")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int):
            raise ConfigError("max_retries must be an integer")
        if not 0 <= max_retries <= MAX_RETRIES:
            raise ConfigError(f"max_retries must be from 0 to {MAX_RETRIES}")
        self.max_retries = max_retries
        self.backoff = positive(backoff, "backoff", allow_zero=True)
        self.max_backoff = positive(max_backoff, "max_backoff", allow_zero=True)
        self._secret = secret
        self._log = logger
        self._extra = extra
        all_headers = {"Content-Type": "application/json", "Accept": "application/json"}
        all_headers.update(headers)
        self._http: httpx.Client = hx.Client(
            timeout=hx.Timeout(self.timeout), headers=all_headers, follow_redirects=False
        )

    def close(self) -> None:
        self._http.close()

    def post(
        self,
        url: str,
        body: bytes,
        *,
        shown_url: str | None = None,
        abort: threading.Event | None = None,
    ) -> httpx.Response:
        """The first successful response, or :class:`HttpFailure` after the retries.

        ``shown_url`` is what logs and errors name (default ``url``). When ``abort`` is
        set (another part of the same call failed for good), no retry is attempted and
        a pending backoff sleep ends at once.
        """
        hx = import_httpx(self._extra)
        shown = shown_url or url
        attempts = 0
        while True:
            attempts += 1
            wait: float | None = None
            try:
                response = self._http.post(url, content=body)
            except hx.TimeoutException as exc:
                failure = self._failure(
                    "timeout", f"no answer within {self.timeout:g} s", attempts, exc
                )
            except (hx.NetworkError, hx.RemoteProtocolError) as exc:
                failure = self._failure("connection", "cannot reach the server", attempts, exc)
            except hx.HTTPError as exc:  # a local protocol or URL problem: not transient
                raise self._failure("transport", "the request failed", attempts, exc) from exc
            else:
                if response.is_success:
                    response.extensions["mindfile_attempts"] = attempts
                    return response
                status = response.status_code
                failure = HttpFailure(
                    "http_status",
                    f"the server answered HTTP {status}",
                    attempts,
                    status=status,
                    body=self.redact(excerpt(response.text)),
                )
                if status != 429 and not 500 <= status <= 599:
                    raise failure
                wait = retry_after(response.headers.get("retry-after"))
            if attempts > self.max_retries or (abort is not None and abort.is_set()):
                raise failure
            delay = self._delay(attempts, wait)
            self._log.warning(
                "call to %s failed (%s, attempt %d of %d); retrying in %.2f s",
                shown,
                failure.message,
                attempts,
                self.max_retries + 1,
                delay,
            )
            if abort is None:
                time.sleep(delay)
            elif abort.wait(delay):
                raise failure

    def redact(self, text: str) -> str:
        """``text`` without the secret or any bearer token."""
        if self._secret:
            text = text.replace(self._secret, "***")
        return _BEARER.sub(r"\1***", text)

    def _failure(self, reason: str, message: str, attempts: int, cause: Exception) -> HttpFailure:
        text = f"{message} ({type(cause).__name__}: {self.redact(str(cause))})"
        return HttpFailure(reason, text, attempts)

    def _delay(self, attempt: int, wait: float | None) -> float:
        if wait is not None:
            return min(wait, self.max_backoff)
        # Jitter spreads the retries of many clients hit by the same outage.
        delay = self.backoff * 2.0 ** (attempt - 1) * random.uniform(1.0, 1.25)
        return min(delay, self.max_backoff)


def import_httpx(extra: str) -> ModuleType:
    try:
        return importlib.import_module("httpx")
    except ImportError as exc:
        raise BackendUnavailableError(
            f"this needs httpx: pip install 'mindfile[{extra}]'", package="httpx"
        ) from exc


def check_base_url(base_url: Any) -> str:
    """A normalised http(s) URL without credentials, query or fragment."""
    if not isinstance(base_url, str) or not base_url.strip():
        raise ConfigError("base_url must be a URL such as http://127.0.0.1:11434/v1")
    url = base_url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("base_url must be an http:// or https:// URL with a host")
    if parts.username or parts.password:
        # Credentials in a URL end up in logs and error messages; use api_key instead.
        raise ConfigError("base_url must not contain credentials; pass api_key instead")
    if parts.query or parts.fragment:
        raise ConfigError("base_url must not have a query string or fragment")
    return url


def check_api_key(api_key: Any) -> str | None:
    """A stripped key, None for none; refuses keys that would break a header."""
    if not isinstance(api_key, str | None):
        raise ConfigError("api_key must be a string or None")
    key = (api_key or "").strip()
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in key):
        raise ConfigError("api_key contains whitespace or control characters")
    return key or None


def positive(value: Any, what: str, *, allow_zero: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"{what} must be a {'non-negative' if allow_zero else 'positive'} number")
    return float(value)


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"
