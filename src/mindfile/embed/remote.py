"""Embedding providers over HTTP: OpenAI-compatible servers, Ollama, Gemini, Voyage.

Every provider shares one request policy (:mod:`mindfile._http`: time-out per attempt,
retries with exponential backoff and jitter on time-outs, connection errors, 429 and
5xx, ``Retry-After`` honoured, other 4xx final) and one response check: the answer
must hold one finite vector of the expected size per text, in order, else
:class:`~mindfile.errors.EmbeddingError` (``details["reason"]``: ``timeout``,
``connection``, ``http_status``, ``bad_response``, ``wrong_count``,
``wrong_dimensions``, ``not_finite``). Vectors are L2-normalised float32.

Inputs are split into requests of at most ``batch_size`` texts and about
``max_batch_tokens`` tokens (estimated as characters / 4, conservative for English),
sent ``max_concurrency`` at a time; order is kept. Remote embedders are never
``local``: Mindfile never calls them under its write lock (docs/architecture.md).

API keys come from the argument or the provider's variable; they never appear in
``repr()``, log records, errors, or the store. ``model_id`` is
``provider/model@dimensions``. Needs httpx: ``pip install 'mindfile[openai]'`` (or
``[ollama]``, ``[gemini]``, ``[voyage]``). See docs/embeddings.md.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

import numpy as np

from mindfile._http import HttpFailure, JsonPoster, check_api_key, check_base_url, excerpt
from mindfile.embed.base import Vector, Vectors, normalize
from mindfile.errors import ConfigError, EmbeddingError, InvalidInputError

__all__ = [
    "GeminiEmbedder",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "RemoteEmbedder",
    "VoyageEmbedder",
]

logger = logging.getLogger("mindfile.embed")

InputType = Literal["document", "query"]

#: Output sizes of well-known models (used when ``dimensions`` is not given).
KNOWN_DIMENSIONS: dict[str, dict[str, int]] = {
    "openai": {
        "text-embedding-3-small": 1536,
        "text-embedding-3-large": 3072,
        "text-embedding-ada-002": 1536,
    },
    "ollama": {
        "nomic-embed-text": 768,
        "mxbai-embed-large": 1024,
        "all-minilm": 384,
        "snowflake-arctic-embed": 1024,
        "bge-m3": 1024,
    },
    "gemini": {
        "text-embedding-004": 768,
        "gemini-embedding-001": 3072,
        "embedding-001": 768,
    },
    "voyage": {
        "voyage-3": 1024,
        "voyage-3-lite": 512,
        "voyage-3-large": 1024,
        "voyage-3.5": 1024,
        "voyage-3.5-lite": 1024,
        "voyage-code-3": 1024,
    },
}

MAX_BATCH = 2048
MAX_CONCURRENCY = 32


class RemoteEmbedder:
    """The shared machinery; subclasses say where to send a batch and how to read it."""

    provider: ClassVar[str] = ""
    default_base_url: ClassVar[str] = ""
    key_env: ClassVar[tuple[str, ...]] = ()
    #: Whether a key is required (Ollama and local OpenAI-compatible servers need none).
    key_required: ClassVar[bool] = True
    default_batch_size: ClassVar[int] = 128
    local = False

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout: float = 30.0,
        batch_size: int | None = None,
        max_batch_tokens: int = 100_000,
        max_concurrency: int = 4,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 20.0,
    ) -> None:
        if not isinstance(model, str) or not model.strip() or "@" in model:
            raise ConfigError(f"{self.provider} embedder needs a model name (without '@')")
        self.model = _model_name(self.provider, model.strip())
        env_url = self._env_base_url()
        self.base_url = check_base_url(base_url or env_url or self.default_base_url)
        # A key from the environment goes only where the environment points: the
        # provider's own host or the URL the environment names, never to a base_url
        # given in code (a local server must not receive a cloud key).
        trusted = {check_base_url(self.default_base_url)}
        if env_url:
            trusted.add(check_base_url(env_url))
        env_key = self._env_key() if self.base_url in trusted else None
        self._api_key = check_api_key(api_key if api_key is not None else env_key)
        if self._api_key is None and self.key_required and self._needs_key():
            names = " or ".join(self.key_env)
            raise ConfigError(f"the {self.provider} embedder needs an API key: set {names}")
        known = KNOWN_DIMENSIONS.get(self.provider, {}).get(self.model)
        requested = _dims(dimensions)
        if requested is None and known is None:
            raise ConfigError(
                f"the size of {self.provider} model {self.model!r} is not known: give it, "
                f"e.g. '{self.provider}:{self.model}@768' or dimensions=768"
            )
        # Ask the server for a size only when it differs from the model's own (models
        # without shortened embeddings, like ada-002, reject the parameter).
        self._requested_dims = requested if requested is not None and requested != known else None
        self._dims: int = requested if requested is not None else int(known or 0)
        self.batch_size = _int_in(batch_size or self.default_batch_size, 1, MAX_BATCH, "batch_size")
        self.max_batch_tokens = _int_in(max_batch_tokens, 1, 10_000_000, "max_batch_tokens")
        self.max_concurrency = _int_in(max_concurrency, 1, MAX_CONCURRENCY, "max_concurrency")
        self._http = JsonPoster(
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            max_backoff=max_backoff,
            headers=self._headers(),
            secret=self._api_key,
            logger=logger,
            extra=self.provider,
        )

    # -- the Embedder protocol -----------------------------------------------------------

    @property
    def model_id(self) -> str:
        return f"{self.provider}/{self.model}@{self.dimensions}"

    @property
    def dimensions(self) -> int:
        """The vector size: given, or known for the model (never asked over the network)."""
        return self._dims

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts, "document")

    def embed_query(self, text: str) -> Vector:
        if not isinstance(text, str):
            raise InvalidInputError("the query must be a string")
        vector: Vector = self._embed([text], "query")[0]
        return vector

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return (
            f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r}, "
            f"api_key={key}, dimensions={self._dims})"
        )

    # -- batching ------------------------------------------------------------------------

    def _embed(self, texts: Sequence[str], kind: InputType) -> Vectors:
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise InvalidInputError("texts must be a list of strings")
        dims = self.dimensions
        if not texts:
            return np.zeros((0, dims), dtype=np.float32)
        batches = self._batches(list(texts))
        if len(batches) == 1 or self.max_concurrency == 1:
            parts = [self._checked(b, kind, dims) for b in batches]
        else:
            # Once one batch fails for good, the others stop retrying (a 400 must not
            # wait out another batch's Retry-After).
            abort = threading.Event()

            def run(batch: list[str]) -> np.ndarray:
                try:
                    return self._checked(batch, kind, dims, abort)
                except BaseException:
                    abort.set()
                    raise

            workers = min(self.max_concurrency, len(batches))
            with ThreadPoolExecutor(workers, thread_name_prefix="mindfile-embed") as pool:
                parts = list(pool.map(run, batches))
        return normalize(np.concatenate(parts, axis=0))

    def _batches(self, texts: list[str]) -> list[list[str]]:
        out: list[list[str]] = []
        current: list[str] = []
        tokens = 0
        for text in texts:
            cost = max(1, math.ceil(len(text) / 4))
            if current and (
                len(current) >= self.batch_size or tokens + cost > self.max_batch_tokens
            ):
                out.append(current)
                current, tokens = [], 0
            current.append(text)
            tokens += cost
        if current:
            out.append(current)
        return out

    def _checked(
        self,
        batch: list[str],
        kind: InputType,
        dims: int,
        abort: threading.Event | None = None,
    ) -> np.ndarray:
        rows = self._call(batch, kind, abort)
        if len(rows) != len(batch):
            raise self._error(
                "wrong_count", f"sent {len(batch)} texts, got {len(rows)} vectors back"
            )
        if not all(
            isinstance(row, list)
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in row)
            for row in rows
        ):
            raise self._error("bad_response", "vectors must be lists of JSON numbers")
        try:
            matrix = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise self._error("bad_response", f"vectors are not numbers: {exc}") from exc
        if matrix.ndim != 2 or matrix.shape[1] != dims:
            got = matrix.shape[1] if matrix.ndim == 2 else "ragged"
            raise self._error("wrong_dimensions", f"expected {dims}-dimensional vectors, got {got}")
        with np.errstate(over="ignore", invalid="ignore"):
            single = matrix.astype(np.float32)
        if not np.isfinite(single).all():
            raise self._error("not_finite", "the provider returned NaN or infinite values")
        if not (np.linalg.norm(single, axis=1) > 0).all():
            raise self._error("bad_response", "the provider returned an all-zero vector")
        return single

    def _call(
        self, batch: list[str], kind: InputType, abort: threading.Event | None = None
    ) -> list[Any]:
        # Providers reject empty input; a blank text is sent as one space.
        batch = [t if t.strip() else " " for t in batch]
        url, body = self._request(batch, kind)
        try:
            response = self._http.post(
                url, _json_bytes(body), shown_url=self._shown(url), abort=abort
            )
        except HttpFailure as failure:
            raise self._error(
                failure.reason, failure.message, attempts=failure.attempts, **failure.details
            ) from failure
        try:
            data = response.json()
            rows = self._vectors(data)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise self._error(
                "bad_response",
                f"the answer is not an embeddings response ({type(exc).__name__})",
                body=self._http.redact(excerpt(response.text, 500)),
            ) from exc
        if not isinstance(rows, list):
            raise self._error("bad_response", "the answer holds no list of vectors")
        return rows

    def _error(self, reason: str, message: str, **details: Any) -> EmbeddingError:
        return EmbeddingError(
            f"{self.provider} embedding ({self.model}) failed: {self._http.redact(message)}",
            reason=reason,
            provider=self.provider,
            model=self.model,
            **details,
        )

    # -- per provider --------------------------------------------------------------------

    def _env_key(self) -> str | None:
        for name in self.key_env:
            value = os.environ.get(name)
            if value:
                return value
        return None

    def _env_base_url(self) -> str | None:
        return None

    def _needs_key(self) -> bool:
        return True

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _shown(self, url: str) -> str:
        return url

    def _request(self, batch: list[str], kind: InputType) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def _vectors(self, data: Any) -> list[Any]:
        raise NotImplementedError


class OpenAIEmbedder(RemoteEmbedder):
    """Any OpenAI-compatible ``POST {base_url}/embeddings`` server.

    OpenAI itself (``OPENAI_API_KEY``), or vLLM, LM Studio, llama.cpp's server, a
    LiteLLM proxy... (``base_url=`` or ``OPENAI_BASE_URL``; a key is optional for
    servers other than api.openai.com). ``dimensions`` asks OpenAI's text-embedding-3
    models for shortened vectors.
    """

    provider = "openai"
    default_base_url = "https://api.openai.com/v1"
    key_env = ("OPENAI_API_KEY",)

    def _env_base_url(self) -> str | None:
        return os.environ.get("OPENAI_BASE_URL")

    def _needs_key(self) -> bool:
        return "api.openai.com" in self.base_url

    def _request(self, batch: list[str], kind: InputType) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self._requested_dims is not None:
            body["dimensions"] = self._requested_dims
        return self.base_url + "/embeddings", body

    def _vectors(self, data: Any) -> list[Any]:
        return _indexed(data["data"])


class OllamaEmbedder(RemoteEmbedder):
    """A local Ollama server (``POST /api/embed``; ``OLLAMA_HOST``, no key)."""

    provider = "ollama"
    default_base_url = "http://127.0.0.1:11434"
    key_required = False
    default_batch_size = 64

    def _env_base_url(self) -> str | None:
        host = os.environ.get("OLLAMA_HOST")
        if not host:
            return None
        if "://" not in host:
            host = "http://" + host
        parts = urlsplit(host)
        if parts.port is None and parts.hostname:
            host = f"{parts.scheme}://{parts.hostname}:11434{parts.path}"
        return host

    def _request(self, batch: list[str], kind: InputType) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"model": self.model, "input": batch}
        if self._requested_dims is not None:
            body["dimensions"] = self._requested_dims
        return self.base_url + "/api/embed", body

    def _vectors(self, data: Any) -> list[Any]:
        return list(data["embeddings"])


class GeminiEmbedder(RemoteEmbedder):
    """Google's Gemini API (``batchEmbedContents``; ``GEMINI_API_KEY``/``GOOGLE_API_KEY``).

    Documents are sent as ``RETRIEVAL_DOCUMENT``, queries as ``RETRIEVAL_QUERY``. The key
    travels in the ``x-goog-api-key`` header, never in the URL.
    """

    provider = "gemini"
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    default_batch_size = 100

    def _headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self._api_key} if self._api_key else {}

    def _request(self, batch: list[str], kind: InputType) -> tuple[str, dict[str, Any]]:
        name = f"models/{self.model}"
        task = "RETRIEVAL_DOCUMENT" if kind == "document" else "RETRIEVAL_QUERY"
        requests = []
        for text in batch:
            item: dict[str, Any] = {
                "model": name,
                "content": {"parts": [{"text": text}]},
                "taskType": task,
            }
            if self._requested_dims is not None:
                item["outputDimensionality"] = self._requested_dims
            requests.append(item)
        return f"{self.base_url}/{name}:batchEmbedContents", {"requests": requests}

    def _vectors(self, data: Any) -> list[Any]:
        return [e["values"] for e in data["embeddings"]]


class VoyageEmbedder(RemoteEmbedder):
    """Voyage AI (``POST /v1/embeddings``; ``VOYAGE_API_KEY``), with ``input_type``."""

    provider = "voyage"
    default_base_url = "https://api.voyageai.com/v1"
    key_env = ("VOYAGE_API_KEY",)

    def _request(self, batch: list[str], kind: InputType) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"model": self.model, "input": batch, "input_type": kind}
        if self._requested_dims is not None:
            body["output_dimension"] = self._requested_dims
        return self.base_url + "/embeddings", body

    def _vectors(self, data: Any) -> list[Any]:
        return _indexed(data["data"])


PROVIDERS: dict[str, type[RemoteEmbedder]] = {
    cls.provider: cls for cls in (OpenAIEmbedder, OllamaEmbedder, GeminiEmbedder, VoyageEmbedder)
}


def from_spec(provider: str, arg: str) -> RemoteEmbedder:
    """``"openai:MODEL"`` or ``"openai:MODEL@DIMS"`` (shortened vectors) -> an embedder."""
    model, _, dims = arg.partition("@")
    if not model:
        raise ConfigError(f"give a model: '{provider}:MODEL' (e.g. {_example(provider)})")
    dimensions: int | None = None
    if dims:
        if not dims.isdigit():
            raise ConfigError(f"bad dimensions {dims!r} in '{provider}:{arg}'")
        dimensions = int(dims)
    return PROVIDERS[provider](model, dimensions=dimensions)


def _example(provider: str) -> str:
    known = KNOWN_DIMENSIONS.get(provider, {})
    return f"'{provider}:{next(iter(known))}'" if known else f"'{provider}:MODEL'"


def _model_name(provider: str, model: str) -> str:
    """One name per model: Ollama's ``name:latest`` is ``name``."""
    if provider == "ollama" and model.endswith(":latest"):
        return model[: -len(":latest")]
    return model


def _indexed(items: Any) -> list[Any]:
    """Vectors in input order from ``[{"index": i, "embedding": [...]}, ...]``; every
    index exactly once (a duplicate or missing index is a malformed answer)."""
    if not isinstance(items, list):
        raise TypeError("data is not a list")
    indexes = [d.get("index") if isinstance(d, dict) else None for d in items]
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in indexes):
        if all(i is None for i in indexes):
            return [d["embedding"] for d in items]  # no indexes: the order as given
        raise ValueError("bad index fields")
    if sorted(indexes) != list(range(len(items))):  # type: ignore[type-var]
        raise ValueError("duplicate or missing index fields")
    return [d["embedding"] for _, d in sorted(zip(indexes, items, strict=True))]


def _dims(value: Any) -> int | None:
    if value is None:
        return None
    return _int_in(value, 1, 65_536, "dimensions")


def _int_in(value: Any, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{what} must be an integer from {low} to {high}")
    return value


def _json_bytes(body: dict[str, Any]) -> bytes:
    try:
        return json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise InvalidInputError(f"texts cannot be sent as JSON: {exc}") from exc
