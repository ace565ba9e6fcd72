"""The read path: full-text, vector and hybrid search with fusion."""

from mindfile.retrieve.fts import fts_query
from mindfile.retrieve.fusion import min_max, rrf_fusion, weighted_fusion
from mindfile.retrieve.search import SearchRequest, SearchResults, run_search

__all__ = [
    "SearchRequest",
    "SearchResults",
    "fts_query",
    "min_max",
    "rrf_fusion",
    "run_search",
    "weighted_fusion",
]
