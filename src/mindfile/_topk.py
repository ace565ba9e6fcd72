"""Selecting the ``k`` largest of a long score array, shared by the exact vector index
and the in-heap BM25 index.

``np.partition`` of a whole array costs ~0.7-0.9 ms at 117k float32 scores whatever
``k``: most of a search's time after the int8 dot products. The ``k``-th largest of any
subset is at most the ``k``-th largest of the whole, so the ``k``-th largest of a strided
sample is a floor that every one of the ``k`` best reaches: partitioning only the scores
at or above it gives the same answer, exactly, in ~0.1 ms.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["kth_largest", "top_positions"]

#: How many scores of the sample's floor on average are above it, per one of the ``k``.
#: The sample holds every ``len // (OVERSAMPLE * k)``-th score, so about ``OVERSAMPLE *
#: k`` scores reach its floor.
OVERSAMPLE = 16
#: Below this many scores per one of the ``k``, one partition of the whole is as cheap.
SAMPLE_FROM = 4 * OVERSAMPLE


def kth_largest(values: npt.NDArray[np.number[Any]], k: int) -> float:
    """The ``k``-th largest of ``values`` (``1 <= k <= len(values)``; no NaN)."""
    n = len(values)
    if not 1 <= k <= n:
        raise ValueError(f"k={k} outside 1..{n}")
    if n >= SAMPLE_FROM * k:
        sample = values[:: n // (OVERSAMPLE * k)]
        floor = np.partition(sample, len(sample) - k)[len(sample) - k]
        values = values[values >= floor]  # holds the sample's k best: at least k
        n = len(values)
    return float(np.partition(values, n - k)[n - k])


def top_positions(values: npt.NDArray[np.number[Any]], k: int) -> npt.NDArray[np.intp]:
    """Positions of the scores at or above the ``k``-th largest (every score tied with
    it included, so the set does not depend on ``k`` past ties), unordered; all of them
    when ``k >= len(values)``."""
    if k >= len(values):
        return np.arange(len(values))
    return np.flatnonzero(values >= kth_largest(values, k))
