"""A deterministic hash embedder: same text, same vector; no semantics.

blake3 of the normalised text seeds a PCG64 generator that draws a Gaussian vector,
which is L2-normalised. Useful for tests and minimal installs: exact (or whitespace/
case-different) text matches score 1.0, everything else is near-orthogonal.
"""

from __future__ import annotations

from collections.abc import Sequence

import blake3
import numpy as np

from mindfile.embed.base import Vector, Vectors, normalize

__all__ = ["HashEmbedder"]


class HashEmbedder:
    """Deterministic pseudo-random vectors keyed by blake3 of the normalised text."""

    #: In-process and fast: may run inside a caller's transaction (index/embedding.py).
    local = True

    def __init__(self, dimensions: int = 256) -> None:
        if dimensions < 1:
            raise ValueError("dimensions must be positive")
        self._dims = dimensions
        # Its vectors only recognise (near-)identical text, so hybrid search leans on BM25:
        # LoCoMo recall@10 0.748 at 0.1 / 0.9 vs 0.089 at the seed's 0.7 / 0.3.
        self.fusion_weights: tuple[float, float] | None = (0.1, 0.9)

    @property
    def model_id(self) -> str:
        return f"hash-blake3-{self._dims}"

    @property
    def dimensions(self) -> int:
        return self._dims

    def _one(self, text: str) -> Vector:
        key = " ".join(text.lower().split()).encode("utf-8", "surrogatepass")
        seed = int.from_bytes(blake3.blake3(key).digest(length=32), "little")
        rng = np.random.Generator(np.random.PCG64(seed))
        return normalize(rng.standard_normal(self._dims))

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dims), dtype=np.float32)
        return np.stack([self._one(t) for t in texts])

    def embed_query(self, text: str) -> Vector:
        return self._one(text)
