"""The read path: full-text, vector and hybrid search with fusion."""

from engram.retrieve.fts import fts_query
from engram.retrieve.fusion import min_max, rrf_fusion, weighted_fusion
from engram.retrieve.search import SearchRequest, SearchResults, run_search

__all__ = [
    "SearchRequest",
    "SearchResults",
    "fts_query",
    "min_max",
    "rrf_fusion",
    "run_search",
    "weighted_fusion",
]
