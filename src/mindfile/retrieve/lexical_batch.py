"""Documents analysed for the BM25 index (:mod:`mindfile.retrieve.lexical`) in batches:
their text in, tokenised as FTS5 tokenises it (:class:`Analyzer`), their postings out
as flat arrays a :class:`~mindfile.retrieve.lexical_state.Delta` appends in place."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

import apsw
import numpy as np
import numpy.typing as npt

from mindfile.retrieve.fts import content_words, query_words
from mindfile.storage.index_source import ChunkText

__all__ = ["Analyzer", "Batch", "analyse_batch"]


class _Ids(dict[str, int]):
    """Terms numbered in order of first appearance (the lookup stays in C)."""

    def __missing__(self, key: str) -> int:
        value = self[key] = len(self)
        return value


@dataclass(frozen=True)
class Batch:
    """Several documents analysed at once: their postings as flat arrays sorted by
    (term, document), terms and documents numbered within the batch."""

    rowids: list[int]
    sessions: list[str]
    terms: list[str]
    pair_term: npt.NDArray[np.int32]
    pair_doc: npt.NDArray[np.int32]
    pair_tf: npt.NDArray[np.float32]
    lengths: npt.NDArray[np.float32]


def analyse_batch(
    rowids: list[int],
    sessions: list[str],
    columns: list[list[list[str]]],
    weights: Sequence[float],
) -> Batch:
    """A :class:`Batch` from each document's tokens per column (``columns[doc][col]``).

    The term frequency of a term in a document is the column-weighted count, as FTS5's
    ``bm25()`` weighs columns; the document's length is its token count over all columns.
    Per token only C-level work runs (``list.extend``, a dict lookup through ``map``);
    counting is one sort of ``(term, doc)`` keys. ~3x faster than a dict per document.
    """
    n_docs = len(rowids)
    tokens: list[str] = []
    sizes: list[int] = []
    for doc_columns in columns:
        for toks in doc_columns:
            tokens.extend(toks)
            sizes.append(len(toks))
    ids = _Ids()
    term = np.fromiter(map(ids.__getitem__, tokens), dtype=np.int64, count=len(tokens))
    per_col = np.asarray(sizes, dtype=np.int64).reshape(n_docs, len(weights))
    doc = np.repeat(np.arange(n_docs, dtype=np.int64), per_col.sum(axis=1))
    weight = np.repeat(np.tile(np.asarray(weights, dtype=np.float64), n_docs), per_col.ravel())
    key = (term << 32) | doc
    order = np.argsort(key)
    key = key[order]
    if len(key):
        starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        tf = np.add.reduceat(weight[order], starts)
        key = key[starts]
    else:
        tf = np.zeros(0, dtype=np.float64)
    return Batch(
        rowids=rowids,
        sessions=sessions,
        terms=list(ids),
        pair_term=(key >> 32).astype(np.int32),
        pair_doc=(key & 0xFFFFFFFF).astype(np.int32),
        pair_tf=tf.astype(np.float32),
        lengths=per_col.sum(axis=1).astype(np.float32),
    )


class Analyzer:
    """FTS5's ``porter unicode61 remove_diacritics 2`` tokenizer (``tokenize``, the
    database's own, called through apsw) with the index's column weights: the terms of
    queries, and chunks analysed into a :class:`Batch`."""

    def __init__(self, tokenize: Callable[..., Any], weights: tuple[float, float, float]) -> None:
        self._tokenize = tokenize
        self.weights = weights
        #: Stored in a published generation's manifest: one analysed otherwise is stale.
        self.name = f"fts5 porter unicode61 remove_diacritics 2; weights {list(weights)}"
        self.stem = lru_cache(maxsize=65536)(self._stem_uncached)

    def tokens(self, text: str) -> list[str]:
        if not text:
            return []
        out = self._tokenize(
            text.encode("utf-8", "replace"),
            apsw.FTS5_TOKENIZE_DOCUMENT,
            None,
            include_offsets=False,
            include_colocated=False,
        )
        # Without colocated tokens apsw returns plain strings.
        return cast("list[str]", out)

    def _stem_uncached(self, word: str) -> str | None:
        toks = self.tokens(word)
        return toks[0] if toks else None

    def query_terms(self, text: str) -> list[str]:
        """The stemmed, de-duplicated, stop-word-free terms of a query (as FTS5 sees them)."""
        stems = (self.stem(word) for word in query_words(text))
        return list(dict.fromkeys(s for s in stems if s))

    def content_terms(self, text: str) -> list[str]:
        """:meth:`query_terms` of a whole text, however many words it has (a query's
        are capped at ``MAX_QUERY_TERMS``)."""
        stems = (self.stem(word) for word in content_words(text))
        return list(dict.fromkeys(s for s in stems if s))

    def analyse(
        self, rows: Sequence[ChunkText], pause: Callable[[], bool] | None = None
    ) -> Batch | None:
        """``rows`` (chunk id, session, text, context before, context after) as a
        :class:`Batch`. ``pause`` is called every 16 chunks (a background catch-up hands
        the GIL over there); when it answers True, the analysis stops: None."""
        columns: list[list[list[str]]] = []
        # The chunks of one event share their neighbour context: tokenise it once.
        seen: dict[str, list[str]] = {}
        for i, (_rowid, _session, *texts) in enumerate(rows):
            if pause is not None and i % 16 == 0 and pause():
                return None
            own, *context = texts
            doc = [self.tokens(own)]
            for text in context:
                toks = seen.get(text)
                if toks is None:
                    toks = seen[text] = self.tokens(text)
                doc.append(toks)
            columns.append(doc)
        return analyse_batch(
            [int(r[0]) for r in rows], [str(r[1]) for r in rows], columns, self.weights
        )
