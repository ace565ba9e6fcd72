"""``onnx:minilm``: the int8 all-MiniLM-L6-v2 in ONNX Runtime (the ``[onnx]`` extra)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mindfile
from mindfile.embed import resolve_embedder
from mindfile.embed.onnx import MODEL_ID, OnnxMiniLMEmbedder
from mindfile.errors import ConfigError


@pytest.fixture(scope="module")
def onnx() -> OnnxMiniLMEmbedder:
    embedder = resolve_embedder("onnx:minilm")
    assert isinstance(embedder, OnnxMiniLMEmbedder)
    return embedder


def test_meaning_not_words(onnx: OnnxMiniLMEmbedder) -> None:
    a, b, c = onnx.embed_documents(
        [
            "I moved to Lisbon in May",
            "Last spring I relocated to Portugal's capital",
            "The quarterly report is due on Friday",
        ]
    )
    assert float(a @ b) > 0.6 > 0.2 > float(a @ c)
    assert onnx.model_id == MODEL_ID and onnx.dimensions == 384 and onnx.local


def test_it_matches_the_published_model(onnx: OnnxMiniLMEmbedder) -> None:
    # sentence-transformers' quickstart with all-MiniLM-L6-v2 (float32) prints these
    # similarities: 0.6660, 0.1046, 0.1411. The int8 weights stay within 0.01.
    out = onnx.embed_documents(
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    )
    sims = out @ out.T
    assert sims[0, 1] == pytest.approx(0.6660, abs=0.01)
    assert sims[0, 2] == pytest.approx(0.1046, abs=0.01)
    assert sims[1, 2] == pytest.approx(0.1411, abs=0.01)


def test_batching_does_not_change_vectors(onnx: OnnxMiniLMEmbedder) -> None:
    texts = [f"message {i}: " + "lorem ipsum " * (i * 7) for i in range(40)]
    together = onnx.embed_documents(texts)
    alone = np.stack([onnx.embed_query(t) for t in texts[:5]])
    np.testing.assert_allclose(together[:5], alone, atol=1e-4)
    assert onnx.embed_documents(["word " * 2000]).shape == (1, 384)  # truncated to 256


def test_a_store_reopens_with_its_model(tmp_path: Path, onnx: OnnxMiniLMEmbedder) -> None:
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder=onnx) as mem:
        mem.store("chat", 1, "I moved to Lisbon in May")
        mem.store("chat", 2, "The quarterly report is due on Friday")
    with mindfile.open(path) as mem:  # the model id names a local model: rebuilt
        assert mem.embedder.model_id == MODEL_ID
        hit = mem.search("where does the user live now?", mode="vector", top_k=1)[0]
        assert hit.text == "I moved to Lisbon in May"


def test_the_model_file_is_checked(tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not a model")
    with pytest.raises(ConfigError, match="sha256"):
        OnnxMiniLMEmbedder(fake)
    with pytest.raises(ConfigError):
        OnnxMiniLMEmbedder(tmp_path / "missing.onnx")
    with pytest.raises(ConfigError):
        resolve_embedder("onnx:bert-large")
