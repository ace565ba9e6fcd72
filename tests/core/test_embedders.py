"""One conformance suite for every shipped :class:`~mindfile.Embedder`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import mindfile
from mindfile.embed import resolve_embedder
from mindfile.embed.base import from_blob, to_blob
from mindfile.errors import ConfigError

TEXTS = [
    "The feline slept on the warm windowsill.",
    "Quarterly revenue grew by twelve percent.",
    "a",
    "Ünïcödé façade — naïve café 東京",
    "many words " * 1000,
]

FACTORIES: dict[str, Callable[[], mindfile.Embedder]] = {
    "hash": lambda: mindfile.HashEmbedder(),
    "hash-64": lambda: mindfile.HashEmbedder(64),
    "static": lambda: mindfile.StaticEmbedder(),
    "onnx-minilm": lambda: resolve_embedder("onnx:minilm"),  # the [onnx] extra (in [dev])
}


@pytest.fixture(params=sorted(FACTORIES), scope="module")
def embedder(request: pytest.FixtureRequest) -> mindfile.Embedder:
    return FACTORIES[request.param]()


def test_is_an_embedder(embedder: mindfile.Embedder) -> None:
    assert isinstance(embedder, mindfile.Embedder)
    assert isinstance(embedder.model_id, str) and embedder.model_id
    assert isinstance(embedder.dimensions, int) and embedder.dimensions > 0


def test_documents_shape_dtype_and_norm(embedder: mindfile.Embedder) -> None:
    out = embedder.embed_documents(TEXTS)
    assert out.shape == (len(TEXTS), embedder.dimensions)
    assert out.dtype == np.float32
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_query_equals_single_document(embedder: mindfile.Embedder) -> None:
    for text in TEXTS:
        query = embedder.embed_query(text)
        assert query.shape == (embedder.dimensions,)
        assert query.dtype == np.float32
        np.testing.assert_allclose(query, embedder.embed_documents([text])[0], atol=1e-6)


def test_deterministic_across_instances_and_batches(embedder: mindfile.Embedder) -> None:
    name = next(k for k, f in FACTORIES.items() if f().model_id == embedder.model_id)
    again = FACTORIES[name]()
    np.testing.assert_array_equal(embedder.embed_documents(TEXTS), again.embed_documents(TEXTS))
    one_by_one = np.stack([embedder.embed_documents([t])[0] for t in TEXTS])
    np.testing.assert_allclose(embedder.embed_documents(TEXTS), one_by_one, atol=1e-6)


def test_empty_batch(embedder: mindfile.Embedder) -> None:
    out = embedder.embed_documents([])
    assert out.shape == (0, embedder.dimensions)
    assert out.dtype == np.float32


def test_text_with_no_known_tokens_is_zero_or_unit(embedder: mindfile.Embedder) -> None:
    # The static model has no vector for text made only of unknown tokens (a 5000-char
    # "word", emoji): it returns zeros rather than noise. Never anything in between.
    out = embedder.embed_documents(["x" * 5000, "🙂🙂", ""])
    norms = np.linalg.norm(out, axis=1)
    assert np.all(np.isclose(norms, 0.0, atol=1e-6) | np.isclose(norms, 1.0, atol=1e-5))


def test_different_texts_differ(embedder: mindfile.Embedder) -> None:
    a, b = embedder.embed_documents(TEXTS[:2])
    assert float(a @ b) < 0.9


def test_static_model_knows_meaning() -> None:
    model = mindfile.StaticEmbedder()
    cat, car, kitten = model.embed_documents(["cat", "car", "kitten"])
    assert float(cat @ kitten) > float(cat @ car)


def test_hash_embedder_ignores_case_and_spacing() -> None:
    h = mindfile.HashEmbedder()
    np.testing.assert_array_equal(h.embed_query("Hello  World"), h.embed_query("hello world"))
    with pytest.raises(ValueError):
        mindfile.HashEmbedder(0)


def test_blob_round_trip() -> None:
    v = mindfile.HashEmbedder(32).embed_query("round trip")
    blob = to_blob(v)
    assert len(blob) == 32 * 4
    np.testing.assert_array_equal(from_blob(blob), v)


def test_resolve_specs() -> None:
    assert resolve_embedder("hash").model_id == "hash-blake3-256"
    assert resolve_embedder("hash:12").dimensions == 12
    assert resolve_embedder(None).model_id == mindfile.StaticEmbedder().model_id
    assert resolve_embedder("static").model_id == resolve_embedder("default").model_id
    mine = mindfile.HashEmbedder(8)
    assert resolve_embedder(mine) is mine
    with pytest.raises(ConfigError):
        resolve_embedder("nope:1")


def test_register_embedder() -> None:
    mindfile.register_embedder("tiny-test", lambda arg: mindfile.HashEmbedder(int(arg or 4)))
    with mindfile.open(":memory:", embedder="tiny-test:6") as mem:
        assert mem.embedder.dimensions == 6
        mem.store("s", 1, "registered")
        assert mem.search("registered")[0].text == "registered"
