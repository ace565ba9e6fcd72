"""The :class:`Embedder` seam and the vector encoding shared by every backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from mindfile.errors import EmbeddingError

__all__ = [
    "Embedder",
    "Vector",
    "Vectors",
    "check_query_vector",
    "check_vectors",
    "from_blob",
    "normalize",
    "to_blob",
]

Vector = npt.NDArray[np.float32]
Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into L2-normalised float32 vectors.

    ``model_id`` is recorded in the store: vectors from different models are never mixed.
    Documents and queries are embedded separately because some models treat them
    differently (instruction prefixes, asymmetric encoders).

    Optional attribute ``local = True``: the embedder runs in-process with no I/O, so it
    may be called inside a caller's own write transaction (see
    :mod:`mindfile.index.embedding`); any other embedder never is.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """A ``(len(texts), dimensions)`` float32 array, rows L2-normalised."""
        ...

    def embed_query(self, text: str) -> Vector:
        """A ``(dimensions,)`` float32 vector, L2-normalised."""
        ...


def normalize(matrix: npt.NDArray[np.floating]) -> Vectors:
    """Row-wise L2 normalisation (zero rows stay zero)."""
    out = np.asarray(matrix, dtype=np.float32)
    if out.ndim == 1:
        norm = float(np.linalg.norm(out))
        scaled: Vectors = out / norm if norm > 0 else out
        return scaled
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    rows: Vectors = (out / norms).astype(np.float32, copy=False)
    return rows


def check_vectors(vectors: npt.NDArray[np.floating], count: int, dims: int, who: str) -> Vectors:
    """Validate an embedder's output shape and values; returns normalised float32."""
    return normalize(_checked(vectors, (count, dims), who, ""))


def check_query_vector(vector: object, dims: int, who: str) -> Vector:
    """Validate a query embedding (``dims`` finite numbers) as :func:`check_vectors`
    does a batch; returns it normalised, or raises :class:`EmbeddingError`."""
    return normalize(_checked(vector, (dims,), who, " for a query"))


def _checked(value: object, shape: tuple[int, ...], who: str, what: str) -> Vectors:
    try:
        arr = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError, OverflowError) as exc:
        kind = type(value).__name__
        raise EmbeddingError(f"{who} returned {kind}{what}, not numbers", embedder=who) from exc
    if arr.shape != shape:
        raise EmbeddingError(
            f"{who} returned shape {arr.shape}{what}, expected {shape}", embedder=who
        )
    if not np.all(np.isfinite(arr)):
        raise EmbeddingError(f"{who} returned NaN or infinite values", embedder=who)
    return arr


def to_blob(vector: npt.NDArray[np.floating]) -> bytes:
    """Little-endian float32 bytes."""
    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes) -> Vector:
    """Inverse of :func:`to_blob`."""
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)
