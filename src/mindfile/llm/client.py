"""Chat completions: the :class:`ChatClient` seam, its OpenAI-compatible HTTP client, JSON.

One client speaks the OpenAI ``POST {base_url}/chat/completions`` API, which OpenAI,
Ollama, vLLM, LM Studio and most local servers implement. Mindfile never needs it on the
write path; only the optional features in :mod:`mindfile.llm.tasks` use it.

Failure policy (see ``docs/llm.md``):

* each attempt has ``timeout`` seconds; connect errors, time-outs, dropped connections,
  429 and 5xx answers are retried up to ``max_retries`` times with exponential backoff
  (``backoff * 2**n``, a little jitter, at most ``max_backoff``); a ``Retry-After`` header
  replaces the computed delay, capped at ``max_backoff``;
* any other 4xx is final at once; every final failure is an :class:`LLMError` whose
  ``details["reason"]`` names it;
* the API key never appears in ``repr()``, log records or error messages and details.

:func:`complete_json` adds the strict JSON contract: the answer must be exactly one JSON
object (no duplicate keys, no NaN) that validates against the given JSON Schema, else
:class:`LLMError` with the raw text (truncated) in ``details["raw"]``; no partial data
is ever returned.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit

import jsonschema
from jsonschema.protocols import Validator

from mindfile._http import (
    HttpFailure,
    JsonPoster,
    check_api_key,
    check_base_url,
)
from mindfile._http import (
    excerpt as _excerpt,
)
from mindfile.errors import ConfigError, InvalidInputError, LLMError

if TYPE_CHECKING:
    import httpx

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "MODEL_ENV",
    "ChatClient",
    "ChatMessage",
    "ChatResponse",
    "JsonMode",
    "OpenAICompatibleClient",
    "complete_json",
    "parse_json_reply",
]

logger = logging.getLogger("mindfile.llm")

#: One chat message: ``{"role": "system" | "user" | "assistant", "content": ...}``.
ChatMessage = Mapping[str, Any]

#: How a JSON answer is requested: ``response_format`` with the JSON Schema (``schema``),
#: plain JSON mode (``object``), or only by the prompt (``prompt``, for old servers).
JsonMode = Literal["schema", "object", "prompt"]

API_KEY_ENV = "MINDFILE_LLM_API_KEY"
BASE_URL_ENV = "MINDFILE_LLM_BASE_URL"
MODEL_ENV = "MINDFILE_LLM_MODEL"
OPENAI_HOST = "api.openai.com"

#: How much of a raw answer or error body an :class:`LLMError` keeps.
_SCHEMA_ERRORS_SHOWN = 5
_SCHEMA_NAME = re.compile(r"[^a-zA-Z0-9_-]+")


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """One model answer.

    ``content`` is the assistant message text; ``finish_reason`` is the server's
    (``stop``, ``length``...); token counts are ``None`` when the server sends no usage;
    ``attempts`` is how many HTTP requests it took (1 without retries).
    """

    content: str
    model: str
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    attempts: int = 1

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the fields."""
        return {
            "content": self.content,
            "model": self.model,
            "finish_reason": self.finish_reason,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "attempts": self.attempts,
        }


@runtime_checkable
class ChatClient(Protocol):
    """The seam every LLM-backed feature uses: one chat completion per call.

    Implementations raise :class:`~mindfile.errors.LLMError` for every failure (never
    return an empty or partial answer). ``json_schema`` asks for a JSON answer shaped by
    that schema; callers still validate it (:func:`parse_json_reply`).
    """

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        """Send ``messages`` and return the assistant's answer."""
        ...


class OpenAICompatibleClient:
    """A :class:`ChatClient` for any server speaking OpenAI's chat-completions API.

    ``base_url`` ends before ``/chat/completions``: ``https://api.openai.com/v1``,
    ``http://127.0.0.1:11434/v1`` (Ollama), ``http://127.0.0.1:8000/v1`` (vLLM),
    ``http://127.0.0.1:1234/v1`` (LM Studio). ``api_key=None`` reads
    ``MINDFILE_LLM_API_KEY``, or ``OPENAI_API_KEY`` when the host is ``api.openai.com``
    (so an OpenAI key is never sent to another server); ``api_key=""`` sends none.
    ``timeout`` is per attempt, so a call takes at most about
    ``(max_retries + 1) * timeout`` plus the backoff delays. Needs the ``llm`` extra
    (``pip install 'mindfile[llm]'``). Thread-safe; close it (or use ``with``).
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
        backoff: float = 0.5,
        max_backoff: float = 20.0,
        json_mode: JsonMode = "schema",
    ) -> None:
        self.base_url = check_base_url(base_url)
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("model must be a non-empty string, e.g. 'gpt-4o-mini'")
        self.model = model.strip()
        if json_mode not in ("schema", "object", "prompt"):
            raise ConfigError("json_mode must be 'schema', 'object' or 'prompt'")
        self.json_mode: JsonMode = json_mode
        self._api_key = _resolve_api_key(api_key, self.base_url)
        self._endpoint = self.base_url + "/chat/completions"
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        self._http = JsonPoster(
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            max_backoff=max_backoff,
            headers=headers,
            secret=self._api_key,
            logger=logger,
            extra="llm",
        )
        self.timeout = self._http.timeout
        self.max_retries = self._http.max_retries
        self.backoff = self._http.backoff
        self.max_backoff = self._http.max_backoff

    @classmethod
    def from_env(cls, **options: Any) -> OpenAICompatibleClient:
        """A client from ``MINDFILE_LLM_BASE_URL``, ``MINDFILE_LLM_MODEL`` and the key variables.

        Keyword ``options`` (``timeout=``, ``max_retries=``...) are passed through and
        win over the environment.
        """
        base_url = options.pop("base_url", None) or os.environ.get(BASE_URL_ENV)
        model = options.pop("model", None) or os.environ.get(MODEL_ENV)
        if not base_url or not model:
            raise ConfigError(f"set {BASE_URL_ENV} and {MODEL_ENV} to configure the LLM client")
        return cls(base_url, model=model, **options)

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return (
            f"OpenAICompatibleClient(base_url={self.base_url!r}, model={self.model!r}, "
            f"api_key={key}, timeout={self.timeout}, max_retries={self.max_retries})"
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> OpenAICompatibleClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the API ------------------------------------------------------------------------

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        """One chat completion, retried as described in the module docstring."""
        body = self._body(messages, json_schema, temperature, max_tokens)
        try:
            response = self._http.post(self._endpoint, body)
        except HttpFailure as failure:
            raise LLMError(
                f"LLM call failed after {failure.attempts} attempt(s): {failure.message}",
                reason=failure.reason,
                model=self.model,
                url=self._endpoint,
                attempts=failure.attempts,
                **failure.details,
            ) from failure
        return self._parse(response, int(response.extensions["mindfile_attempts"]))

    def complete_json(
        self,
        messages: Sequence[ChatMessage],
        *,
        schema: Mapping[str, Any],
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> dict[str, Any]:
        """:func:`complete_json` on this client."""
        return complete_json(
            self, messages, schema=schema, temperature=temperature, max_tokens=max_tokens
        )

    # -- internals ----------------------------------------------------------------------

    def _body(
        self,
        messages: Sequence[ChatMessage],
        json_schema: Mapping[str, Any] | None,
        temperature: float,
        max_tokens: int | None,
    ) -> bytes:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": _check_messages(messages),
            "temperature": _check_temperature(temperature),
        }
        if max_tokens is not None:
            if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
                raise InvalidInputError("max_tokens must be a positive integer or None")
            body["max_tokens"] = max_tokens
        if json_schema is not None:
            _validator(json_schema)  # a bad schema is the caller's bug: fail before sending
            if self.json_mode == "schema":
                name = _SCHEMA_NAME.sub("_", str(json_schema.get("title") or "mindfile_answer"))
                body["response_format"] = {
                    "type": "json_schema",
                    # strict=False: OpenAI's strict mode rejects common keywords
                    # (maxLength, pattern...); Mindfile validates every answer itself.
                    "json_schema": {
                        "name": name[:64],
                        "schema": dict(json_schema),
                        "strict": False,
                    },
                }
            elif self.json_mode == "object":
                body["response_format"] = {"type": "json_object"}
        try:
            return json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"messages are not JSON-serialisable: {exc}") from exc

    def _parse(self, response: httpx.Response, attempts: int) -> ChatResponse:
        try:
            data = response.json()
            choice = data["choices"][0]
            message = choice["message"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise self._error(
                "bad_response",
                "the server's answer is not a chat completion",
                attempts,
                body=self._redact(_excerpt(response.text)),
                cause=exc,
            ) from exc
        refusal = message.get("refusal") if isinstance(message, dict) else None
        if refusal:
            raise self._error("refusal", "the model refused", attempts, raw=_excerpt(str(refusal)))
        content = _content_text(message.get("content") if isinstance(message, dict) else None)
        if content is None:
            raise self._error("empty", "the model's answer has no text content", attempts)
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return ChatResponse(
            content=content,
            model=str(data.get("model") or self.model),
            finish_reason=_opt_str(choice.get("finish_reason")),
            prompt_tokens=_opt_int(usage.get("prompt_tokens")),
            completion_tokens=_opt_int(usage.get("completion_tokens")),
            attempts=attempts,
        )

    def _error(
        self,
        reason: str,
        message: str,
        attempts: int,
        *,
        cause: BaseException | None = None,
        **details: Any,
    ) -> LLMError:
        if cause is not None:
            message = f"{message} ({type(cause).__name__}: {self._redact(str(cause))})"
        return LLMError(
            f"LLM call failed after {attempts} attempt(s): {message}",
            reason=reason,
            model=self.model,
            url=self._endpoint,
            attempts=attempts,
            **details,
        )

    def _redact(self, text: str) -> str:
        return self._http.redact(text)


# -- the JSON contract ---------------------------------------------------------------------


def complete_json(
    client: ChatClient,
    messages: Sequence[ChatMessage],
    *,
    schema: Mapping[str, Any],
    temperature: float = 0.0,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """Ask ``client`` for a JSON object valid under ``schema``; return it, or raise.

    Any :class:`ChatClient` works. Raises :class:`LLMError` when the call fails or the
    answer breaks the contract (see :func:`parse_json_reply`).
    """
    _validator(schema)
    response = client.complete(
        messages, json_schema=schema, temperature=temperature, max_tokens=max_tokens
    )
    return parse_json_reply(response, schema=schema)


def parse_json_reply(response: ChatResponse, *, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The answer as a JSON object valid under ``schema``, or :class:`LLMError`.

    Strict: the whole content must be one JSON object (surrounding whitespace only; no
    code fences, no duplicate keys, no NaN/Infinity); a ``length`` finish is a truncated
    answer. The error's details keep ``reason`` (``truncated``, ``malformed_json``,
    ``not_an_object``, ``schema_invalid``), ``raw`` (the first 2000 characters) and,
    for schema failures, ``errors``.
    """
    validator = _validator(schema)
    raw = response.content
    common: dict[str, Any] = {"model": response.model, "raw": _excerpt(raw)}
    if response.finish_reason == "length":
        raise LLMError(
            "the model's answer was cut off (finish_reason=length); raise max_tokens",
            reason="truncated",
            **common,
        )
    try:
        data = json.loads(raw, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise LLMError(
            f"the model's answer is not valid JSON: {exc}", reason="malformed_json", **common
        ) from exc
    if not isinstance(data, dict):
        raise LLMError(
            f"the model's answer is JSON but not an object ({type(data).__name__})",
            reason="not_an_object",
            **common,
        )
    problems = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if problems:
        errors = [f"{e.json_path}: {e.message[:200]}" for e in problems[:_SCHEMA_ERRORS_SHOWN]]
        raise LLMError(
            f"the model's answer does not match the schema: {errors[0]}",
            reason="schema_invalid",
            errors=errors,
            **common,
        )
    return data


# -- helpers -------------------------------------------------------------------------------


def _validator(schema: Mapping[str, Any]) -> Validator:
    if not isinstance(schema, Mapping):
        raise InvalidInputError("schema must be a JSON Schema mapping")
    as_dict = dict(schema)
    cls = jsonschema.validators.validator_for(as_dict)
    try:
        cls.check_schema(as_dict)
    except jsonschema.SchemaError as exc:
        raise InvalidInputError(f"invalid JSON Schema: {exc.message}") from exc
    return cls(as_dict)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _resolve_api_key(api_key: str | None, base_url: str) -> str | None:
    if api_key is None:
        api_key = os.environ.get(API_KEY_ENV)
        if not api_key and urlsplit(base_url).hostname == OPENAI_HOST:
            api_key = os.environ.get("OPENAI_API_KEY")
    return check_api_key(api_key)


def _check_messages(messages: Any) -> list[dict[str, Any]]:
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence) or not messages:
        raise InvalidInputError("messages must be a non-empty list of chat messages")
    out = []
    for message in messages:
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise InvalidInputError("each message must be a mapping with a string 'role'")
        out.append(dict(message))
    return out


def _check_temperature(value: Any) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not 0 <= value <= 2:
        raise InvalidInputError("temperature must be a number from 0 to 2")
    return float(value)


def _content_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers answer with content parts
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        joined = "".join(t for t in texts if isinstance(t, str))
        return joined or None
    return None


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
