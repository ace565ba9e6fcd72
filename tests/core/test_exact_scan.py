"""The exact index's int8 scan (with simsimd; numpy's stages are covered with it in
test_exact_codes.py): its kernel, its error bound, and the rows it keeps."""

from __future__ import annotations

import numpy as np
import pytest

from mindfile.vector import _simd, exact
from mindfile.vector.base import row_dots
from mindfile.vector.exact import _Codes, _reach, _top_k

from ._support import none_lost
from .test_exact_codes import clustered, near_queries


def test_the_int8_kernel_is_the_integer_dot_product() -> None:
    rng = np.random.default_rng(11)
    rows = rng.integers(-127, 128, (3000, 384), dtype=np.int8)
    query = rng.integers(-127, 128, 384, dtype=np.int8)
    out = _simd.int8_dots(query, rows)
    assert out.dtype == np.float32 and out.flags.writeable
    assert np.array_equal(out.astype(np.int64), rows.astype(np.int64) @ query.astype(np.int64))


def test_the_int8_kernel_leaves_the_reference_count_of_none_alone() -> None:
    """simsimd 6.5's ``cdist(..., out=...)`` returns None without taking a reference to
    it: each call gave one of None's away, and a process that had searched as many
    times as None had references (~20k each in a 5-minute load test) died with "Fatal
    Python error: none_dealloc". The kernel must not touch None's count."""
    rng = np.random.default_rng(12)
    rows = rng.integers(-127, 128, (50, 64), dtype=np.int8)
    query = rng.integers(-127, 128, 64, dtype=np.int8)
    assert none_lost(lambda: _simd.int8_dots(query, rows), 3000) < 1000


@pytest.mark.parametrize("k", [1, 10, 150])
@pytest.mark.parametrize("allowed_share", [1.0, 0.7, 0.3, 0.15])
def test_the_scan_keeps_every_row_of_the_exact_top_k(k: int, allowed_share: float) -> None:
    """Whatever rows the filter leaves (all; most or 30%: one masked pass; few:
    gathered), the rows the scan keeps hold the float32 top k, and its bounds prune most
    of the rest."""
    x = clustered(12_000, 256, seed=5)
    ids = np.arange(len(x), dtype=np.int64)
    quant = _Codes.fit(x, len(x), lambda: False)
    assert quant is not None
    rng = np.random.default_rng(6)
    for q in near_queries(x, 6):
        mask = None if allowed_share == 1.0 else rng.random(len(x)) < allowed_share
        allowed = np.arange(len(x)) if mask is None else np.flatnonzero(mask)
        gather = mask is not None and 4 * len(allowed) < len(x)
        rows = quant.scan(q, k, len(x), allowed if gather else None, None if gather else mask)
        assert rows is not None
        assert set(rows.tolist()) <= set(allowed.tolist())
        assert len(rows) < len(allowed) // 2  # the bounds prune
        expected = allowed[_top_k(row_dots(x[allowed], q), ids[allowed], k)]
        got = rows[_top_k(row_dots(x[rows], q), ids[rows], k)]
        assert np.array_equal(got, expected)


def test_the_scan_bound_holds_for_every_row() -> None:
    """Each row's int8 score is within its slack of the centred float dot product, for
    queries of any scale (the bound is the scan's whole correctness argument)."""
    x = clustered(2000, 128, seed=9)
    quant = _Codes.fit(x, len(x), lambda: False)
    assert quant is not None
    rng = np.random.default_rng(10)
    for scale in (1e-3, 1.0, 40.0):
        q = (scale * rng.standard_normal(128)).astype(np.float32)
        # Every row is a candidate when k is the row count: compare the bounds directly.
        peak = float(np.abs(q).max()) / 127.0
        qi = np.rint(q / np.float32(peak)).astype(np.int8)
        approx = (quant.int8.astype(np.float64) @ qi.astype(np.float64)) * quant.scale * peak
        truth = (x.astype(np.float64) - quant.mean) @ q.astype(np.float64)
        resid = float(np.linalg.norm(q.astype(np.float64) - qi * peak))
        slack = quant.bound * np.linalg.norm(q) + quant.reach * resid
        assert np.all(np.abs(approx - truth) <= slack)
        rows = quant.scan(q, 5, len(x), None, None)
        assert rows is not None
        best = np.argsort(-(x @ q), kind="stable")[:5]
        assert set(best.tolist()) <= set(rows.tolist())


def test_a_zero_query_falls_back_to_the_float32_product() -> None:
    x = clustered(3000, 64, seed=12)
    ids = np.arange(len(x), dtype=np.int64)
    quant = _Codes.fit(x, len(x), lambda: False)
    assert quant is not None
    assert quant.scan(np.zeros(64, np.float32), 5, len(x), None, None) is None
    got = exact.search_rows(x, ids, len(x), quant, np.zeros(64, np.float32), 5, None, 1)
    assert [s for _, s in got] == [0.0] * 5
    assert [i for i, _ in got] == [2999, 2998, 2997, 2996, 2995]  # ties: higher id first


def test_reach_computed_for_older_codes_equals_the_encoded_one() -> None:
    """Codes published before ``reach`` existed get it computed when loaded: the same
    values encoding gives (to float32 rounding, and never below them)."""
    x = clustered(2500, 96, seed=13)
    quant = _Codes.fit(x, len(x), lambda: False)
    assert quant is not None
    arrays = {k: v for k, v in quant.arrays(len(x)).items() if k != "reach"}
    loaded = _Codes.from_arrays(arrays, quant.fitted_on)
    assert np.allclose(loaded.reach, quant.reach[: len(x)], rtol=1e-6)
    assert np.array_equal(loaded.reach, _reach(quant.int8[: len(x)], quant.scale[: len(x)]))


def test_a_kernel_that_fails_answers_wrong_or_spends_none_is_not_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _simd.works()  # the installed simsimd

    def broken(*args: object, **kw: object) -> None:
        raise TypeError("cdist() got an unexpected keyword argument 'out_dtype'")

    def wrong(a: object, b: object, **kw: object) -> object:
        assert isinstance(b, np.ndarray)
        return np.zeros((1, len(b)), dtype=np.float32)

    spent: list[None] = [None] * 10_000

    def steals_none(a: object, b: object, **kw: object) -> object:
        # What a kernel that hands out None without a reference of its own does to
        # None's count (one less a call), done here without harm: each call drops one
        # of the references this list holds.
        if spent:
            spent.pop()
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
        return (a[:1].astype(np.int64) @ b.astype(np.int64).T).astype(np.float32)

    assert _simd.simsimd is not None
    monkeypatch.setattr(_simd.simsimd, "cdist", broken)
    assert not _simd.works()
    monkeypatch.setattr(_simd.simsimd, "cdist", wrong)
    assert not _simd.works()
    monkeypatch.setattr(_simd.simsimd, "cdist", steals_none)
    assert not _simd.works()
    monkeypatch.setattr(_simd, "simsimd", None)
    assert not _simd.works()
