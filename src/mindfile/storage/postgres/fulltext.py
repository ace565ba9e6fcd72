"""The Postgres :class:`~mindfile.storage.fulltext.FullTextStore`: ranking by the database.

The read path ranks with Mindfile's own BM25 index (derived from ``chunks`` through the
index source) once it is built; this store is its fallback while that index catches up
or where it is off, and what ``lexical_index="fts5"`` ranks with. SQLite answers with
FTS5's ``bm25()``; Postgres has no BM25, so this is ``ts_rank_cd`` (cover density:
how many of the query's lexemes a chunk has and how close together, no inverse document
frequency) over the generated ``chunks.search_tsv`` column and its GIN index. The
ranking differs from SQLite's in its numbers; the contract (which chunks match, best
first, ties to the higher id, the filters) is the same.

**The query.** The words arrive analysed (:func:`mindfile.retrieve.fts.query_words`:
lower-cased ``\\w+`` tokens, stop words dropped). Each one becomes a query of its own
with ``plainto_tsquery('english', %s)``, a bound parameter, and they are OR-ed with
``||``: nothing in a word is ever tsquery syntax (``&``, ``|``, ``!``, ``:*``, quotes are
plain text to ``plainto_tsquery``), and stemming and stop words are the same as the
column's. A word that is only a Postgres stop word adds nothing (the column holds no
stop words: "the" alone matches no chunk here, while FTS5 would find it).

**The weights.** ``weights`` are FTS5's three columns: the chunk's text, its neighbour's
text before, and after. ``search_tsv`` holds the text as weight ``A`` and both context
columns merged as weight ``D`` (migration 0001), so ``A`` gets the text's weight and
``D`` the mean of the two context weights; ``B`` and ``C`` are unused (0). They are
scaled so the largest is 1 (``ts_rank_cd`` accepts weights up to 1; scaling all of them
keeps the order). The rank is normalised by document length (``1 + log(length)``, option
1), BM25's length saturation in spirit.

**The filter.** Sessions (``= ANY``) and tags (each tag contained in the metadata's
``tags`` array, as the note listing asks) are backend-neutral values. ``condition`` is
SQL on ``chunks AS c`` *in Postgres terms* with psycopg placeholders:
:func:`mindfile.storage.postgres.read_stores.scope_where` writes the context builder's
scope so, where SQLite's store takes :meth:`mindfile.storage.recall.Scope.where`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mindfile.storage.postgres.db import PgDatabase

__all__ = ["PgFullTextStore", "rank_weights", "tsquery_sql"]

#: The text search configuration of ``chunks.search_tsv`` (migration 0001).
CONFIG = "english"

SEARCH = """
WITH q AS (SELECT {query} AS query)
SELECT c.id, ts_rank_cd(%s::real[], c.search_tsv, q.query, 1) AS score
FROM chunks AS c, q
WHERE c.search_tsv @@ q.query{where}
ORDER BY score DESC, c.id DESC
LIMIT %s
"""

_TAG = " AND (c.metadata_json::jsonb -> 'tags') @> jsonb_build_array(%s::text)"


def tsquery_sql(count: int) -> str:
    """SQL of a tsquery OR-ing ``count`` words, each a bound parameter read as plain text."""
    if count < 1:
        raise ValueError("a query needs at least one word")
    return " || ".join([f"plainto_tsquery('{CONFIG}', %s)"] * count)


def rank_weights(weights: tuple[float, float, float]) -> list[float]:
    """FTS5's column weights (text, before, after) as ``ts_rank_cd``'s ``{D, C, B, A}``."""
    text, before, after = (max(0.0, float(w)) for w in weights)
    context = (before + after) / 2
    top = max(text, context)
    scale = 1.0 / top if top > 0 else 1.0
    return [context * scale, 0.0, 0.0, text * scale]


class PgFullTextStore:
    """:class:`~mindfile.storage.fulltext.FullTextStore` on ``chunks.search_tsv``."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def search(
        self,
        words: Sequence[str],
        limit: int,
        *,
        weights: tuple[float, float, float],
        session_ids: Sequence[str] | None = None,
        tags: Sequence[str] = (),
        condition: str | None = None,
        params: Sequence[Any] = (),
        after: int = 0,
    ) -> list[tuple[int, float]]:
        """See the protocol; ``condition`` is Postgres SQL on ``chunks AS c`` with
        ``%s`` placeholders (:func:`~mindfile.storage.postgres.read_stores.scope_where`)."""
        words = [str(w) for w in words if w]
        if not words or limit <= 0 or (session_ids is not None and not session_ids):
            return []
        where = ""
        where_params: list[Any] = []
        if after > 0:
            where += " AND c.id > %s"
            where_params.append(int(after))
        if session_ids is not None:
            where += " AND c.session_id = ANY(%s::text[])"
            where_params.append([str(s) for s in session_ids])
        where += _TAG * len(tags)
        where_params += [str(t) for t in tags]
        if condition:
            where += f" AND ({condition})"
            where_params += list(params)
        sql = SEARCH.format(query=tsquery_sql(len(words)), where=where)
        rows = self.db.query(sql, [*words, rank_weights(weights), *where_params, int(limit)])
        return [(int(r), float(s)) for r, s in rows]
