"""Embedders: the :class:`Embedder` seam, the bundled static model, the hash embedder.

``resolve_embedder`` turns a spec into an embedder:

========================  ==============================================
spec                      embedder
========================  ==============================================
``None`` / ``"default"``  the bundled static model (or the store's own)
``"static"``              the bundled static model
``"model2vec:PATH"``      a model2vec model from a local directory
``"hash"`` / ``"hash:N"`` deterministic blake3 vectors, 256 (or N) dims
``"openai:MODEL[@N]"``    any OpenAI-compatible server (``[openai]``)
``"ollama:MODEL"``        a local Ollama server (``[ollama]``)
``"gemini:MODEL[@N]"``    Google's Gemini API (``[gemini]``)
``"voyage:MODEL[@N]"``    Voyage AI (``[voyage]``)
``"onnx:minilm"``         all-MiniLM-L6-v2 int8 in ONNX Runtime, offline (``[onnx]``)
========================  ==============================================

Remote providers (:mod:`mindfile.embed.remote`) read their keys and hosts from the
environment (docs/embeddings.md); ``@N`` asks for ``N``-dimensional vectors.

Third parties add specs with :func:`register_embedder`.
"""

from __future__ import annotations

from collections.abc import Callable

from mindfile.embed.base import Embedder, from_blob, normalize, to_blob
from mindfile.embed.hash import HashEmbedder
from mindfile.embed.static import DEFAULT_MODEL_ID, StaticEmbedder
from mindfile.errors import ConfigError

__all__ = [
    "DEFAULT_MODEL_ID",
    "SEED_FUSION_WEIGHTS",
    "Embedder",
    "HashEmbedder",
    "StaticEmbedder",
    "embedder_for_model_id",
    "from_blob",
    "fusion_calibration",
    "fusion_weights",
    "normalize",
    "register_embedder",
    "resolve_embedder",
    "to_blob",
]

_FACTORIES: dict[str, Callable[[str], Embedder]] = {}


def register_embedder(prefix: str, factory: Callable[[str], Embedder]) -> None:
    """Make ``"prefix"`` / ``"prefix:arg"`` specs build embedders via ``factory(arg)``."""
    _FACTORIES[prefix] = factory


def _hash(arg: str) -> Embedder:
    try:
        return HashEmbedder(int(arg) if arg else 256)
    except ValueError as exc:
        raise ConfigError(f"bad hash embedder dimensions {arg!r}") from exc


register_embedder("hash", _hash)
register_embedder("static", lambda arg: StaticEmbedder(arg or None))
register_embedder("default", lambda arg: StaticEmbedder())
register_embedder("model2vec", lambda arg: StaticEmbedder(arg or None))


def _remote(provider: str) -> Callable[[str], Embedder]:
    def factory(arg: str) -> Embedder:
        from mindfile.embed.remote import from_spec  # imports httpx only when used

        return from_spec(provider, arg)

    return factory


for _provider in ("openai", "ollama", "gemini", "voyage"):
    register_embedder(_provider, _remote(_provider))


def _onnx(arg: str) -> Embedder:
    if arg not in ("", "minilm"):
        raise ConfigError(f"unknown ONNX model {arg!r} (known: onnx:minilm)")
    from mindfile.embed.onnx import OnnxMiniLMEmbedder  # imports onnxruntime when used

    return OnnxMiniLMEmbedder()


register_embedder("onnx", _onnx)


def resolve_embedder(spec: str | Embedder | None) -> Embedder:
    """An embedder from a spec string, an embedder instance, or ``None`` (the default)."""
    if spec is None:
        return StaticEmbedder()
    if not isinstance(spec, str):
        if isinstance(spec, Embedder):
            return spec
        raise ConfigError(f"not an embedder: {spec!r}")
    prefix, _, arg = spec.partition(":")
    factory = _FACTORIES.get(prefix.strip().lower())
    if factory is None:
        known = ", ".join(sorted(_FACTORIES))
        raise ConfigError(f"unknown embedder {spec!r} (known: {known})")
    return factory(arg.strip())


#: The seed's hybrid weights (vector, BM25), for embedders that recommend none.
SEED_FUSION_WEIGHTS = (0.7, 0.3)


def fusion_weights(embedder: Embedder) -> tuple[float, float]:
    """The (vector, BM25) weights hybrid search uses with ``embedder`` by default.

    An embedder may recommend its own with a ``fusion_weights`` attribute (the bundled
    static model recommends 0.3 / 0.7 and the hash embedder 0.1 / 0.9: their vectors are
    weaker evidence than BM25); otherwise the seed's 0.7 / 0.3.
    """
    weights = getattr(embedder, "fusion_weights", None)
    if weights is None:
        return SEED_FUSION_WEIGHTS
    v, f = weights
    return float(v), float(f)


def fusion_calibration(embedder: Embedder) -> tuple[float, float] | None:
    """The (cosine width, BM25 scale) of calibrated fusion with ``embedder``, or None.

    An embedder may recommend them with a ``fusion_calibration`` attribute: the bundled
    static model recommends 0.2 / 8 (chosen on LoCoMo by cross-validation,
    docs/retrieval.md). Absolute scales belong to one model's cosines, so an embedder
    without a recommendation (the hash embedder, other models) is fused with the seed's
    min-max until it is measured.
    """
    calibration = getattr(embedder, "fusion_calibration", None)
    if calibration is None:
        return None
    width, scale = calibration
    return float(width), float(scale)


def embedder_for_model_id(model_id: str) -> Embedder | None:
    """The embedder that made vectors with ``model_id``, if it can be rebuilt offline."""
    if model_id == DEFAULT_MODEL_ID:
        return StaticEmbedder()
    if model_id.startswith("hash-blake3-"):
        return HashEmbedder(int(model_id.rsplit("-", 1)[1]))
    if model_id == "onnx/all-minilm-l6-v2-int8@384":
        return _onnx("minilm")
    return None
