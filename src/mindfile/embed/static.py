"""The default embedder: a model2vec static model shipped inside the package.

No network and no torch at run time: the weights live in ``mindfile/embed/models/``
(built by ``scripts/build_default_model.py``; see docs/embeddings.md). Loading takes a
few hundred milliseconds and happens lazily, on the first embedding call.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mindfile.embed.base import Vector, Vectors, check_vectors
from mindfile.errors import BackendUnavailableError, EmbeddingError

__all__ = ["DEFAULT_MODEL_DIR", "DEFAULT_MODEL_ID", "StaticEmbedder"]

DEFAULT_MODEL_NAME = "minilm-l6-static-256"
DEFAULT_MODEL_DIR = Path(__file__).parent / "models" / DEFAULT_MODEL_NAME
DEFAULT_MODEL_ID = f"mindfile/{DEFAULT_MODEL_NAME}"


class StaticEmbedder:
    """A model2vec ``StaticModel`` loaded from a local directory (never from a hub)."""

    #: In-process and fast: may run inside a caller's transaction (index/embedding.py).
    local = True

    def __init__(self, path: str | Path | None = None, *, model_id: str | None = None) -> None:
        self._path = Path(path) if path is not None else DEFAULT_MODEL_DIR
        if not (self._path / "model.safetensors").exists():
            raise BackendUnavailableError(f"no model2vec model at {self._path}")
        self._model_id = model_id or (
            DEFAULT_MODEL_ID if path is None else f"model2vec:{self._path.name}"
        )
        self._dims = _read_dims(self._path)
        # The bundled model's cosines are weaker evidence than BM25 on conversation
        # memory: LoCoMo recall@10 0.755 at 0.3 / 0.7 vs 0.625 at the seed's 0.7 / 0.3
        # (docs/retrieval.md). Other model2vec models keep the seed's weights.
        self.fusion_weights: tuple[float, float] | None = (0.3, 0.7) if path is None else None
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        return self._dims

    def _load(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    from model2vec import StaticModel

                    model = StaticModel.from_pretrained(str(self._path))
                    # The weights ship as float16 (half the package); numpy's float16
                    # arithmetic is emulated and slow, so pool in float32: 1.7x faster
                    # on 1,000-character chunks, vectors equal to cosine 0.9999998.
                    if model.embedding.dtype == np.float16:
                        model.embedding = model.embedding.astype(np.float32)
                    self._model = model
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dims), dtype=np.float32)
        try:
            out = self._load().encode(list(texts), show_progress_bar=False)
        except Exception as exc:  # a third-party failure must surface as our error
            raise EmbeddingError(f"model2vec failed: {exc}") from exc
        return check_vectors(out, len(texts), self._dims, self._model_id)

    def embed_query(self, text: str) -> Vector:
        row: Vector = self.embed_documents([text])[0]
        return row


def _read_dims(path: Path) -> int:
    import json

    config = json.loads((path / "config.json").read_text())
    return int(config.get("hidden_dim") or config.get("apply_pca") or 256)
