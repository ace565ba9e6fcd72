"""Full-text leg: turn any user text into the words a query searches for, and run BM25.

User text is never passed to FTS5 as syntax. It is split into word tokens, common
English stop words are dropped (unless nothing else is left), and the full-text store
(:mod:`mindfile.storage.fulltext`) quotes and OR-s each one, so quotes, operators,
parentheses, ``NEAR``, column filters and emoji are all just text. BM25 then ranks by
how many (and how rare) of the words a chunk has.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mindfile.storage.db import Database
from mindfile.storage.fulltext import (
    SqliteFullTextStore,
    match_expression,
    session_clause,
    tag_clause,
)

__all__ = [
    "MAX_QUERY_TERMS",
    "STOPWORDS",
    "content_words",
    "fts_query",
    "fts_search",
    "query_words",
    "session_clause",
    "tag_clause",
]

MAX_QUERY_TERMS = 48

_WORD = re.compile(r"\w+", re.UNICODE)

_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me might more most my myself no nor not now of off on once
    only or other our ours ourselves out over own same she should so some such than that
    the their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you
    your yours yourself yourselves s t d ll m re ve"""

STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def query_words(text: str) -> list[str]:
    """The words a query searches for: lower-cased, stop words dropped (unless nothing
    else is left), de-duplicated, at most ``MAX_QUERY_TERMS``. Both BM25 backends use it."""
    words = [w.lower() for w in _WORD.findall(text)]
    content = [w for w in words if w not in STOPWORDS] or words
    return list(dict.fromkeys(content))[:MAX_QUERY_TERMS]


def content_words(text: str) -> list[str]:
    """A text's words as :func:`query_words` takes them (lower-cased, stop words
    dropped, de-duplicated), however many there are, and none when all are stop words."""
    words = (w.lower() for w in _WORD.findall(text))
    return list(dict.fromkeys(w for w in words if w not in STOPWORDS))


def fts_query(text: str) -> str | None:
    """A safe FTS5 MATCH expression for ``text``, or ``None`` if it has no words."""
    return match_expression(query_words(text))


#: BM25 column weights: the chunk's own text, then its neighbours' (see storage.log).
COLUMN_WEIGHTS = (1.0, 0.5, 0.3)


def fts_search(
    db: Database,
    text: str,
    limit: int,
    where: str = "",
    params: Sequence[object] = (),
    *,
    weights: tuple[float, float, float] = COLUMN_WEIGHTS,
) -> list[tuple[int, float]]:
    """``(chunk_rowid, bm25)`` best first; bm25 is negated so higher is better.

    ``where`` is an ``" AND ..."`` condition on ``chunks AS c`` with its ``params``
    (:meth:`mindfile.retrieve.retriever.ReadFilter.clause`). ``weights`` weigh the
    chunk text and its before/after context columns. Equal scores go to the higher
    rowid, as in every leg, so the top ``limit`` is deterministic. The read path asks
    the full-text store with the filter's fields instead (:mod:`mindfile.storage.fulltext`).
    """
    return SqliteFullTextStore(db).search_where(
        query_words(text), limit, where, params, weights=weights, bare=not where
    )
