"""A fast path for the bundled model's tokenizer on ASCII text: same token ids, ~4x faster.

model2vec tokenizes with Hugging Face ``tokenizers`` (BERT uncased: ``BertNormalizer``,
``BertPreTokenizer``, ``WordPiece``). On long ASCII text (source files, chat) that
tokenizer is nearly all of the embedding cost: 0.45 s per MB on this machine, against
0.13 s here. For ASCII the BERT rules are simple enough to restate exactly:

- normalizer: control characters other than tab/newline/CR are dropped, text lowercased
  (accent stripping and CJK spacing never apply to ASCII);
- pre-tokenizer: whitespace separates words; every ASCII punctuation character
  (``!`` to ``/``, ``:`` to ``@``, ``[`` to `````, ``{`` to ``~``) is a word of its own;
  so a word is a run of ``[a-z0-9]`` or one punctuation character;
- WordPiece splits each word; it depends on the word alone, so its ids are cached
  (the real tokenizer's WordPiece model computes them on a miss, so the vocabulary
  logic is not restated).

model2vec cuts a text to ``max_length * median_token_length`` characters, the tokenizer
truncates to ``max_length`` tokens, then unknown-token ids are removed; this does the
same in the same order. Texts with any non-ASCII character take the real tokenizer.
``tests/embed/test_wordpiece.py`` checks id equality on the standard library, LoCoMo
and random ASCII (control characters, long words, long texts).
"""

from __future__ import annotations

import json
import re
import threading
from itertools import chain, compress
from operator import not_
from typing import Any

__all__ = ["FastWordPiece", "median_token_length"]

# On bytes: lowering, dropping and matching ASCII bytes is ~25% faster than on str.
_DROP = bytes(c for c in (*range(32), 127) if chr(c) not in "\t\n\r")
_WORDS = re.compile(rb"[a-z0-9]+|[!-/:-@\[-`{-~]")
#: Distinct words remembered (the standard library has ~60,000); then start over.
CACHE_WORDS = 200_000


class FastWordPiece:
    """Token ids for ASCII texts, equal to model2vec's ``StaticModel.tokenize``."""

    def __init__(
        self,
        tokenizer: Any,
        unk: int,
        max_tokens: int,
        max_chars: int,
        max_word: int,
        added: tuple[str, ...] = (),
    ) -> None:
        self._tokenizer = tokenizer
        self._unk = unk
        self._added = tuple(a.encode("utf-8") for a in added)
        self._max_tokens = max_tokens
        self._max_chars = max_chars
        self._max_word = max_word
        self._cache: dict[bytes, list[int]] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_model(cls, model: Any) -> FastWordPiece | None:
        """The fast path for a model2vec ``StaticModel``, or None if its tokenizer is not
        exactly BERT uncased WordPiece (then only the real tokenizer is right)."""
        try:
            if model.token_mapping is not None or model.weights is not None:
                return None
            return cls.for_tokenizer(
                model.tokenizer,
                json.loads(model.tokenizer.to_str()),
                model.max_length,
                model.median_token_length,
            )
        except (AttributeError, TypeError, ValueError):
            return None

    @classmethod
    def for_tokenizer(
        cls, tokenizer: Any, spec: dict[str, Any], max_length: Any, median_token_length: int
    ) -> FastWordPiece | None:
        """The fast path for a tokenizer (``spec``: its parsed ``tokenizer.json``) as
        model2vec uses it with ``max_length`` and the vocabulary's median token length
        (:func:`median_token_length`); None unless it is BERT uncased WordPiece."""
        try:
            normalizer = spec.get("normalizer") or {}
            wordpiece = spec.get("model") or {}
            unk = tokenizer.token_to_id(wordpiece.get("unk_token") or "")
            bert = (
                normalizer.get("type") == "BertNormalizer"
                and normalizer.get("clean_text") is True
                and normalizer.get("lowercase") is True
                and (spec.get("pre_tokenizer") or {}).get("type") == "BertPreTokenizer"
                and wordpiece.get("type") == "WordPiece"
                and wordpiece.get("continuing_subword_prefix") == "##"
                and unk is not None
                and isinstance(max_length, int)
            )
            if not bert:
                return None
            # Added tokens ("[PAD]", "[UNK]") are matched in the raw text before any
            # rule above: a text holding one takes the real tokenizer.
            added = tuple(str(a.get("content", "")).lower() for a in spec.get("added_tokens") or [])
            if not all(added):
                return None
            return cls(
                tokenizer,
                int(unk),
                int(max_length),
                int(max_length * median_token_length),
                int(wordpiece.get("max_input_chars_per_word", 100)),
                added,
            )
        except (AttributeError, TypeError, ValueError):
            return None

    def ids(self, text: str) -> list[int] | None:
        """The token ids of ``text``, or None when it is not ASCII or holds an added token
        (then use the real tokenizer)."""
        return self.ids_many([text])[0]

    def ids_many(self, texts: list[str]) -> list[list[int] | None]:
        """:meth:`ids` of each text; words never seen go to the tokenizer in one batch."""
        get = self._cache.get
        parts: list[list[list[int] | None] | None] = []
        # Texts with words not in the cache: (their word ids, words, the unknown places).
        holes: list[tuple[list[list[int] | None], list[bytes], list[int]]] = []
        missing: set[bytes] = set()
        for text in texts:
            if not text.isascii():
                parts.append(None)
                continue
            lowered = text[: self._max_chars].encode("ascii").lower()
            if any(a in lowered for a in self._added):
                parts.append(None)
                continue
            found = _WORDS.findall(lowered.translate(None, _DROP))
            known = list(map(get, found))
            if None in known:  # word ids are never empty: falsy means unknown
                places = list(compress(range(len(found)), map(not_, known)))
                missing.update([found[i] for i in places])
                holes.append((known, found, places))
            parts.append(known)
        if missing:
            # Fill only the unknown places (a second lookup of every word of these
            # texts cost ~8% of the helper process's time in a first sync).
            learned = self._learn(sorted(missing))
            for known, found, places in holes:
                for i in places:
                    known[i] = learned[found[i]]
        out: list[list[int] | None] = []
        for maybe in parts:
            if maybe is None:
                out.append(None)
                continue
            flat = list(chain.from_iterable(maybe))  # type: ignore[arg-type]
            del flat[self._max_tokens :]
            if self._unk in flat:
                flat = [i for i in flat if i != self._unk]
            out.append(flat)
        return out

    def tokenizer_ids(self, texts: list[str]) -> list[list[int]]:
        """The ids of texts the fast path does not take (not ASCII, or holding an added
        token), from the real tokenizer exactly as ``StaticModel.tokenize`` gets them:
        the character cut, ``max_tokens``, unknown tokens removed. Used instead of
        model2vec's ``encode``, which would load a second copy of the model (~0.45 s)."""
        encoded = self._tokenizer.encode_batch_fast(
            [t[: self._max_chars] for t in texts], add_special_tokens=False
        )
        out: list[list[int]] = []
        for e in encoded:
            ids = e.ids[: self._max_tokens]
            out.append([i for i in ids if i != self._unk] if self._unk in ids else ids)
        return out

    def _learn(self, words: list[bytes]) -> dict[bytes, list[int]]:
        # A word here is already normalised and pre-tokenized (lowercase, one run of
        # [a-z0-9] or one punctuation character), so the WordPiece model alone gives the
        # ids ``encode`` would: 2.1x faster than ``encode_batch`` (no normaliser,
        # pre-tokenizer, offsets or Encoding objects); 158,000 new words in the standard
        # library's sync: 2.5 -> 1.2 CPU-seconds.
        pieces = self._tokenizer.model.tokenize
        unk = [self._unk]
        learned = {
            w: [t.id for t in pieces(w.decode("ascii"))] if len(w) <= self._max_word else unk
            for w in words
        }
        with self._lock:
            if len(self._cache) + len(learned) > CACHE_WORDS:
                self._cache.clear()
            self._cache.update(learned)
        return learned


def median_token_length(vocab: dict[str, int]) -> int:
    """model2vec's ``StaticModel.median_token_length``: the median length of the
    vocabulary's tokens, in characters (it sets the character cut of long texts)."""
    lengths = sorted(len(token) for token in vocab)
    if not lengths:
        return 0
    mid = len(lengths) // 2
    if len(lengths) % 2:
        return lengths[mid]
    return int((lengths[mid - 1] + lengths[mid]) / 2)
