"""The default embedder: a model2vec static model shipped inside the package.

No network and no torch at run time: the weights live in ``mindfile/embed/models/``
(built by ``scripts/build_default_model.py``; see docs/embeddings.md). Loading takes a
few hundred milliseconds and happens lazily, on the first embedding call.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mindfile.embed._wordpiece import FastWordPiece, median_token_length
from mindfile.embed._worker import MIN_CHARS, EmbedWorker, worker_allowed
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

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        model_id: str | None = None,
        worker: bool | None = None,
    ) -> None:
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
        # Calibrated fusion's absolute scales for this model's cosines (cosine range at
        # least 0.2, BM25 over max(best, 8)): cross-validated on LoCoMo small stores.
        self.fusion_calibration: tuple[float, float] | None = (0.2, 8.0) if path is None else None
        # Token match (docs/retrieval.md): the bundled model's word-piece vectors rerank
        # the best fused candidates, with a weight cross-validated on LoCoMo for this
        # model; other models are not measured, so they do without.
        self.token_match: bool = path is None
        self._model: Any = None
        self._parts: _Parts | None = None
        self._fast: FastWordPiece | None = None
        self._lock = threading.Lock()
        self._model_lock = threading.Lock()
        # Large batches in a helper process (embed/_worker.py): None = where allowed.
        use_worker = worker_allowed() if worker is None else bool(worker)
        self._worker = EmbedWorker(None if path is None else self._path) if use_worker else None

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        return self._dims

    def _ready(self) -> _Parts:
        """What the fast path needs: the float32 matrix, the tokenizer and the ASCII
        tokenizer over it, read straight from the model's files (~0.06 s). model2vec's
        ``from_pretrained`` costs ~0.25 s more (it imports huggingface_hub and deep-copies
        the tokenizer); it is loaded only for a model without the fast path (texts the
        fast path does not take get the real tokenizer's ids and the same pooling)."""
        parts = self._parts
        if parts is None:
            with self._lock:
                parts = self._parts
                if parts is None:
                    parts = _read_parts(self._path)
                    if parts is None:  # not the plain layout: model2vec reads it
                        model = self._load_model()
                        parts = _Parts(
                            model.embedding,
                            bool(model.normalize),
                            FastWordPiece.for_model(model),
                        )
                    self._fast = parts.fast
                    self._parts = parts
        return parts

    def _load(self) -> Any:
        """model2vec's ``StaticModel`` for this model (its embedding in float32)."""
        self._ready()
        return self._load_model()

    def _load_model(self) -> Any:
        if self._model is None:
            with self._model_lock:
                if self._model is None:
                    from model2vec import StaticModel

                    model = StaticModel.from_pretrained(str(self._path))
                    parts = self._parts
                    if parts is not None and parts.matrix.shape == model.embedding.shape:
                        model.embedding = parts.matrix  # one float32 copy, shared
                    elif model.embedding.dtype == np.float16:
                        model.embedding = _as_float32(model.embedding)
                    self._model = model
        return self._model

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's word-piece ids, as :meth:`embed_documents` pools them."""
        parts = self._ready()
        fast = parts.fast
        if fast is None:
            raise EmbeddingError(f"{self._model_id} has no word-piece fast path")
        return _word_pieces(fast, list(texts))

    def token_model_dir(self) -> Path:
        """The model's directory (where its token-neighbour table lives)."""
        return self._path

    def token_vectors(self) -> npt.NDArray[np.float32]:
        """The model's token vectors (one row per word-piece id), float32, shared."""
        return self._ready().matrix

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dims), dtype=np.float32)
        worker = self._worker
        if worker is not None and sum(map(len, texts)) >= MIN_CHARS:
            got = worker.try_embed(list(texts), self._dims)
            if got is not None:
                return check_vectors(got, len(texts), self._dims, self._model_id)
        try:
            out = self._encode(list(texts))
        except Exception as exc:  # a third-party failure must surface as our error
            raise EmbeddingError(f"model2vec failed: {exc}") from exc
        return check_vectors(out, len(texts), self._dims, self._model_id)

    def _encode(self, texts: list[str]) -> Vectors:
        """``model.encode(texts)``, with ASCII texts tokenized by the fast path
        (:mod:`mindfile.embed._wordpiece`: same ids) and pooled as model2vec pools."""
        parts = self._ready()
        fast = parts.fast
        if fast is None:
            return np.asarray(self._load_model().encode(texts, show_progress_bar=False))
        ids = _word_pieces(fast, texts)
        out = np.zeros((len(texts), self._dims), dtype=np.float32)
        # model2vec's pooling (StaticModel._encode_batch): texts of one token count
        # together, mean of their token vectors, then L2 normalisation.
        buckets: dict[int, list[int]] = defaultdict(list)
        for i, row in enumerate(ids):
            if row:
                buckets[len(row)].append(i)
        embedding = parts.matrix
        for length, indices in buckets.items():
            matrix = np.array([ids[i] for i in indices], dtype=np.int64)
            # The mean as a sum divided in place: the same float32 values as
            # ``.mean(axis=1).astype(np.float32)`` without its two temporary copies
            # (pooling Lib/'s chunks 1.05 -> 0.91 CPU-s).
            pooled = embedding[matrix].sum(axis=1)
            pooled /= np.float32(length)
            if parts.normalize:
                pooled /= np.linalg.norm(pooled, axis=1, keepdims=True) + 1e-32
            out[indices] = pooled
        return out

    def close(self) -> None:
        """Stop the helper process, if one runs (it also stops by itself when idle)."""
        if self._worker is not None:
            self._worker.close()

    def embed_query(self, text: str) -> Vector:
        row: Vector = self.embed_documents([text])[0]
        return row


def _word_pieces(fast: FastWordPiece, texts: list[str]) -> list[list[int]]:
    """Each text's word-piece ids: the fast path's, and for the texts it does not take
    (non-ASCII, added tokens) the real tokenizer's, cut and filtered as model2vec does."""
    ids = fast.ids_many(texts)
    slow = [i for i, row in enumerate(ids) if row is None]
    if slow:
        for i, other in zip(slow, fast.tokenizer_ids([texts[i] for i in slow]), strict=True):
            ids[i] = other
    return [row or [] for row in ids]


@dataclass(frozen=True, slots=True)
class _Parts:
    matrix: npt.NDArray[np.float32]
    normalize: bool
    fast: FastWordPiece | None


def _as_float32(matrix: Any) -> npt.NDArray[np.float32]:
    # The weights ship as float16 (half the package); numpy's float16 arithmetic is
    # emulated and slow, so pool in float32: 1.7x faster on 1,000-character chunks,
    # vectors equal to cosine 0.9999998.
    return np.ascontiguousarray(matrix, dtype=np.float32)


def _read_parts(path: Path) -> _Parts | None:
    """The model's matrix, tokenizer and fast path from the plain model2vec layout
    (``model.safetensors`` with only ``embeddings``, ``tokenizer.json``,
    ``config.json``) as ``StaticModel.from_pretrained`` would set them; None for any
    other layout, or a tokenizer the fast path does not cover."""
    import json

    from safetensors import safe_open
    from tokenizers import Tokenizer

    files = [path / "model.safetensors", path / "tokenizer.json", path / "config.json"]
    if not all(f.is_file() for f in files):
        return None
    with safe_open(str(files[0]), framework="numpy") as tensors:
        if set(tensors.keys()) != {"embeddings"}:
            return None  # vocabulary-quantised weights or a token mapping
        matrix = _as_float32(tensors.get_tensor("embeddings"))
    text = files[1].read_text("utf-8")
    spec = json.loads(text)
    config = json.loads(files[2].read_text("utf-8"))
    vocab = (spec.get("model") or {}).get("vocab")
    if not isinstance(vocab, dict) or len(vocab) != len(matrix):
        return None
    tokenizer = Tokenizer.from_str(text)
    padding = tokenizer.padding
    if padding is not None:  # as model2vec does: keep the pad token, never pad
        tokenizer.enable_padding(
            pad_id=padding["pad_id"],
            pad_token=padding["pad_token"],
            pad_type_id=padding["pad_type_id"],
            length=0,
        )
    fast = FastWordPiece.for_tokenizer(
        tokenizer, spec, config.get("max_length", 512), median_token_length(vocab)
    )
    if fast is None:
        return None
    return _Parts(matrix, bool(config.get("normalize", False)), fast)


def _read_dims(path: Path) -> int:
    import json

    config = json.loads((path / "config.json").read_text())
    return int(config.get("hidden_dim") or config.get("apply_pca") or 256)
