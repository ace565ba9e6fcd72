"""The bundled model's fast ASCII tokenizer gives exactly the real tokenizer's ids."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindfile.embed._wordpiece import CACHE_WORDS, FastWordPiece
from mindfile.embed.static import StaticEmbedder
from mindfile.files.lines import chunk_lines


@pytest.fixture(scope="module")
def embedder() -> StaticEmbedder:
    return StaticEmbedder()


@pytest.fixture(scope="module")
def model(embedder: StaticEmbedder) -> Any:
    return embedder._load()


def reference(model: Any, texts: list[str]) -> list[list[int]]:
    """model2vec's own ids: the character cut, the tokenizer's 512-token truncation,
    unknown tokens removed (``StaticModel.encode`` does exactly this)."""
    cut = model.max_length * model.median_token_length
    model._set_max_length_in_tokenizer(model.max_length)
    ids: list[list[int]] = model.tokenize([t[:cut] for t in texts])
    return ids


def fast_ids(embedder: StaticEmbedder, texts: list[str]) -> list[list[int] | None]:
    fast = embedder._fast
    assert fast is not None, "the bundled model must get the fast path"
    return [fast.ids(t) for t in texts]


def test_the_standard_library_tokenizes_identically(embedder: StaticEmbedder, model: Any) -> None:
    lib = Path(os.__file__).parent
    texts: list[str] = []
    for path in sorted(lib.glob("*.py"))[::3]:
        source = path.read_text("utf-8", errors="replace")
        texts.extend(c.text for c in chunk_lines(source))
        texts.append(source[:20_000])  # whole files: the 3,072-char cut and 512 tokens
    ascii_texts = [t for t in texts if t.isascii()]
    assert len(ascii_texts) > 1_000
    assert fast_ids(embedder, ascii_texts) == reference(model, ascii_texts)


PIECES = [chr(c) for c in range(128)] + ["[PAD]", "[UNK]", "[unk]", "##", "x" * 101, "  "]
ASCII = st.lists(st.sampled_from(PIECES), max_size=400).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(ASCII, min_size=1, max_size=6))
def test_random_ascii_tokenizes_identically(texts: list[str]) -> None:
    embedder = _shared()
    model = embedder._load()
    got = fast_ids(embedder, texts)
    want = reference(model, texts)
    for text, mine, theirs in zip(texts, got, want, strict=True):
        if mine is not None:  # None: a text the fast path hands to the real tokenizer
            assert mine == theirs, repr(text)


def test_texts_the_fast_path_does_not_take(embedder: StaticEmbedder, model: Any) -> None:
    got = fast_ids(embedder, ["café", "naïve", "日本", "a [PAD] b", "[UNK]", "ok"])
    assert got == [None, None, None, None, None, reference(model, ["ok"])[0]]


def test_other_texts_get_the_real_tokenizers_ids(embedder: StaticEmbedder, model: Any) -> None:
    fast = embedder._fast
    assert fast is not None
    texts = ["café", "naïve", "日本", "a [PAD] b", "[UNK]", "", "ü " * 2_000, "日" * 4_000]
    texts.append(("é" + "x" * 150 + " ") * 40 + "tail")  # unknown words; the cut drops "tail"
    assert fast.tokenizer_ids(texts) == reference(model, texts)


def test_long_texts_are_cut_like_model2vec(embedder: StaticEmbedder, model: Any) -> None:
    texts = ["word " * 2_000, "a" * 5_000, "x y " * 800 + "tail", "(" * 600]
    assert fast_ids(embedder, texts) == reference(model, texts)


def test_vectors_match_model2vec(embedder: StaticEmbedder, model: Any) -> None:
    texts = [
        "I moved to Lisbon in May",
        "def f(x):\n    return x ** 2  # square",
        "mixed: café au lait",  # not ASCII: the real tokenizer
        "日本語のテキスト",
        "über " * 1_000,  # cut like model2vec before tokenizing
        "",
        "[PAD]",
        "one more line\twith a tab\x0cand a form feed",
        "a" * 5_000,
    ]
    mine = embedder.embed_documents(texts)
    theirs = model.encode(texts, show_progress_bar=False)
    np.testing.assert_allclose(mine, theirs, atol=1e-6)


def test_the_word_cache_is_bounded(model: Any) -> None:
    fast = FastWordPiece.for_model(model)
    assert fast is not None
    fast.ids_many([f"a{i}" for i in range(CACHE_WORDS - 5)])
    assert len(fast._cache) == CACHE_WORDS - 5
    ids = fast.ids_many([f"w{i}" for i in range(10)])  # over the bound: start over
    assert ids == reference(model, [f"w{i}" for i in range(10)])
    assert len(fast._cache) == 10


def test_other_tokenizers_do_not_get_the_fast_path(model: Any) -> None:
    class Cased:
        tokenizer = model.tokenizer
        unk_token_id = model.unk_token_id
        token_mapping = None
        weights = np.ones(3)  # weighted pooling: ids alone are not enough
        max_length = 512
        median_token_length = 6

    assert FastWordPiece.for_model(Cased()) is None


_EMBEDDER: list[StaticEmbedder] = []


def _shared() -> StaticEmbedder:
    if not _EMBEDDER:
        _EMBEDDER.append(StaticEmbedder())
    return _EMBEDDER[0]
