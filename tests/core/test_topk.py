"""The sampled selection of ``mindfile._topk`` gives numpy's answer exactly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mindfile._topk import SAMPLE_FROM, kth_largest, top_positions


def _oracle(values: np.ndarray, k: int) -> float:
    return float(np.sort(values)[::-1][k - 1])


@settings(max_examples=300, deadline=None)
@given(
    values=hnp.arrays(
        np.float32,
        st.integers(1, 3000),
        # few distinct values: long runs of ties around the k-th
        elements=st.sampled_from([-2.5, -1.0, 0.0, 0.25, 0.5, 1.0, 3.0])
        | st.floats(-4, 4, width=32),
    ),
    k_share=st.floats(0, 1),
)
def test_kth_largest_matches_a_full_sort(values: np.ndarray, k_share: float) -> None:
    k = 1 + int(k_share * (len(values) - 1))
    assert kth_largest(values, k) == _oracle(values, k)


@pytest.mark.parametrize("k", [1, 3, 10, 150, 1000])
@pytest.mark.parametrize("order", ["random", "ascending", "descending", "tied"])
def test_sampled_path_on_long_arrays(k: int, order: str) -> None:
    """Long enough for the sample (``SAMPLE_FROM * k`` and more), in the orders that
    could fool a strided sample: sorted either way, and one value repeated."""
    rng = np.random.default_rng(k)
    values = rng.normal(size=max(120_000, SAMPLE_FROM * k)).astype(np.float32)
    if order == "ascending":
        values.sort()
    elif order == "descending":
        values = np.sort(values)[::-1].copy()
    elif order == "tied":
        values = np.round(values * 2) / 2  # ~15 distinct values
    assert len(values) >= SAMPLE_FROM * k  # the sampled path runs
    assert kth_largest(values, k) == _oracle(values, k)
    top = top_positions(values, k)
    kth = _oracle(values, k)
    assert set(top.tolist()) == set(np.flatnonzero(values >= kth).tolist())
    assert len(top) >= k


def test_top_positions_of_a_short_array_is_all_of_it() -> None:
    values = np.array([0.5, 0.25, 1.0], dtype=np.float64)
    assert top_positions(values, 3).tolist() == [0, 1, 2]
    assert top_positions(values, 10).tolist() == [0, 1, 2]
    assert sorted(top_positions(values, 2).tolist()) == [0, 2]


@pytest.mark.parametrize("k", [0, 4])
def test_k_outside_the_array_is_refused(k: int) -> None:
    with pytest.raises(ValueError):
        kth_largest(np.zeros(3, dtype=np.float32), k)
