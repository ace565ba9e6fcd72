"""The exact index's quantised search must give the float32 answer, by either path:

* the int8 scan (simsimd: every allowed row's int8 score with its error bound, then
  float32 for the rows that can reach the top k);
* numpy's stages (sign codes, then int8 with error bounds over a shortlist, then
  float32), used without simsimd.

Each test runs on both paths (the ``kernel`` fixture), against the brute-force oracle,
and the kernels and stages against numpy re-computations."""

from __future__ import annotations

import functools
import threading
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

import mindfile
import mindfile.vector as vector_mod
from mindfile.vector import _simd, exact
from mindfile.vector.base import row_dots
from mindfile.vector.exact import ExactIndex, _Codes, _top_k

from .test_vector_index import DIMS, IndexMachine, check, unit


@pytest.fixture(autouse=True, params=["scan", "stages"])
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test on each search path: the int8 scan, and numpy's stages."""
    if request.param == "scan":
        assert _simd.simsimd is not None, "simsimd is a core dependency"
        monkeypatch.setattr(_simd, "ENABLED", True)
    else:
        if not exact._HAS_POPCOUNT:
            pytest.skip("numpy's stages need numpy >= 2.0 (bitwise_count)")
        monkeypatch.setattr(_simd, "ENABLED", False)
    return str(request.param)


@pytest.fixture
def codes_always(monkeypatch: pytest.MonkeyPatch) -> str:
    """An ``exact-codes`` index: codes from the first vector, built inline, and every
    vector in the shortlist (so the oracle's answer is required, not just likely)."""
    factory = functools.partial(ExactIndex, quantize_from=1, background=False)
    monkeypatch.setitem(vector_mod._INDEXES, "exact-codes", factory)
    monkeypatch.setattr(exact, "SHORTLIST_FRACTION", 1.0)
    monkeypatch.setattr(exact, "SHORTLIST_MIN", 1)
    return "exact-codes"


def test_quantised_search_matches_brute_force_oracle(codes_always: str) -> None:
    machine = type("Machine_codes", (IndexMachine,), {"index_name": codes_always})
    run_state_machine_as_test(
        machine, settings=settings(max_examples=20, stateful_step_count=20, deadline=None)
    )


def test_codes_are_used_and_follow_writes(codes_always: str, db_path: Path, kernel: str) -> None:
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=codes_always) as mem:
        mem.store_many([(f"s{i % 3}", i // 3, f"memory {i}") for i in range(90)])
        index = mem.index
        assert isinstance(index, ExactIndex)
        assert index.size() == 90
        assert index._quant is not None
        path = "int8 scan (simsimd)" if kernel == "scan" else "numpy stages"
        assert index.stats()["search"] == path
        assert mem.info().extra["vector"]["search"] == path
        for seed in range(5):
            check(mem, unit(seed), 10)
            check(mem, unit(seed), 3, sessions=["s1"])
        mem.forget("s0")
        mem.store("s9", 1, "a late memory")
        for seed in range(5):
            check(mem, unit(seed), 7)
        assert_codes_current(index)


def assert_codes_current(index: ExactIndex) -> None:
    """The held codes are what encoding the held float32 rows afresh gives."""
    quant = index._quant
    assert quant is not None
    n = index._n
    fresh = _Codes(quant.mean, quant.fitted_on, n)
    fresh.encode_range(0, index._matrix[:n], n)
    assert np.array_equal(quant.int8[:n], fresh.int8)
    assert np.array_equal(quant.bits[:, :n], fresh.bits)
    assert np.array_equal(quant.bound[:n], fresh.bound)


def clustered(n: int, dims: int, seed: int) -> npt.NDArray[np.float32]:
    """Unit vectors sharing a common direction, in tight clusters: many near-ties."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((20, dims))
    x = 3.0 + centres[rng.integers(0, 20, n)] + 0.05 * rng.standard_normal((n, dims))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def near_queries(
    x: npt.NDArray[np.float32], seed: int, n: int = 6
) -> list[npt.NDArray[np.float32]]:
    """``n`` unit queries, each a random row of ``x`` moved a little."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        q = x[rng.integers(len(x))] + 0.02 * rng.standard_normal(x.shape[1]).astype(np.float32)
        out.append(q / np.linalg.norm(q))
    return out


def hamming(quant: _Codes, q: npt.NDArray[np.float32], n: int) -> npt.NDArray[np.int64]:
    qbits = np.unpackbits(np.packbits((q - quant.mean) @ quant.proj > 0))
    rows = np.unpackbits(quant.bits[:, :n].T.copy().view(np.uint8), axis=1)
    return (rows != qbits).sum(axis=1)


def test_distances_are_hamming_distances() -> None:
    x = clustered(3000, 64, seed=3)
    quant = _Codes.fit(x, len(x), lambda: False)
    assert quant is not None
    rng = np.random.default_rng(3)
    for trial in range(4):
        q = x[rng.integers(len(x))] + 0.01 * rng.standard_normal(64).astype(np.float32)
        mask = None if trial % 2 == 0 else rng.random(len(x)) < 0.5
        got = quant._distances(q, len(x), mask).astype(np.int64)
        expected = hamming(quant, q, len(x))
        if mask is not None:
            expected[~mask] = exact.BITS + 1
        assert np.array_equal(got, expected)


@pytest.mark.parametrize("k", [1, 10, 150])
def test_bounds_keep_every_row_of_the_exact_top_k(k: int) -> None:
    x = clustered(5000, 256, seed=1)
    ids = np.arange(len(x), dtype=np.int64)
    quant = _Codes.fit(x, len(x), lambda: False)
    assert quant is not None
    rng = np.random.default_rng(2)
    for trial, q in enumerate(near_queries(x, 2)):
        mask = None if trial % 2 == 0 else rng.random(len(x)) < 0.7
        allowed = np.arange(len(x)) if mask is None else np.flatnonzero(mask)
        rows = quant.search(q, k, len(x), mask, len(x))  # every allowed row shortlisted
        assert len(rows) < len(allowed) // 2  # the bounds prune
        assert set(rows) <= set(allowed)
        expected = allowed[_top_k(row_dots(x[allowed], q), ids[allowed], k)]
        got = rows[_top_k(row_dots(x[rows], q), ids[rows], k)]
        assert np.array_equal(got, expected)


def test_a_short_shortlist_still_finds_close_neighbours() -> None:
    x = clustered(6000, 256, seed=4)
    ids = np.arange(len(x), dtype=np.int64)
    quant = _Codes.fit(x, len(x), lambda: False)
    assert quant is not None
    q = x[17]
    rows = quant.search(q, 5, len(x), None, 600)
    got = rows[_top_k(row_dots(x[rows], q), ids[rows], 5)]
    assert got[0] == 17
    assert len(rows) < 1200


def test_codes_build_in_background_while_threads_write(db_path: Path) -> None:
    errors: list[BaseException] = []
    with mindfile.open(db_path, embedder=f"hash:{DIMS}") as mem:
        index = ExactIndex(mem.db, DIMS, quantize_from=50)
        mem.index = index

        def writer(session: str) -> None:
            try:
                for i in range(60):
                    mem.store(session, i, f"{session} says thing {i}")
                    mem.search(f"thing {i}", mode="vector")
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(f"t{n}",)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        deadline = time.monotonic() + 30
        while index._quant is None or index._building:
            assert time.monotonic() < deadline, "codes never built"
            time.sleep(0.01)
            index.size()
        assert index.size() == 240
        assert_codes_current(index)
        mem.forget("t2")
        assert index.size() == 180
        assert_codes_current(index)
        for seed in range(3):
            hits = index.search(unit(seed), 10)
            assert [h for h, _ in hits] == [
                h for h, _ in ExactIndex(mem.db, DIMS).search(unit(seed), 10)
            ]


def test_threads_searching_at_once_get_the_single_thread_answers(
    codes_always: str, db_path: Path
) -> None:
    with mindfile.open(db_path, embedder=f"hash:{DIMS}", vector_index=codes_always) as mem:
        mem.store_many([(f"s{i % 5}", i // 5, f"memory {i}") for i in range(300)])
        index = mem.index
        queries = [unit(seed) for seed in range(40)]
        expected = [index.search(q, 10) for q in queries]
        assert isinstance(index, ExactIndex) and index._quant is not None
        errors: list[BaseException] = []

        def searcher(offset: int) -> None:
            try:
                for round_ in range(5):
                    for i in range(len(queries)):
                        j = (i + offset + round_) % len(queries)
                        assert index.search(queries[j], 10) == expected[j]
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=searcher, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []


def test_a_wide_filter_below_quantize_from_goes_through_the_codes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A filter that leaves fewer rows than ``quantize_from`` but at least
    ``FILTERED_CODES_FROM`` (the preference leg's statements, ~20% of a store) is
    searched through the codes when they exist, and answers as the float32 product does
    when every allowed row is shortlisted."""
    x = clustered(5000, 256, seed=7)
    ids = np.arange(10, 10 + len(x), dtype=np.int64)
    quant = _Codes.fit(x, len(x), lambda: False)
    assert quant is not None
    mask = np.random.default_rng(8).random(len(x)) < 0.3
    allowed = np.flatnonzero(mask)
    monkeypatch.setattr(exact, "FILTERED_CODES_FROM", 1000)
    monkeypatch.setattr(exact, "SHORTLIST_FRACTION", 1.0)
    used: list[int] = []
    method = "scan" if _simd.ENABLED else "search"
    real = getattr(_Codes, method)

    def spy(self: _Codes, *args: object, **kw: object) -> npt.NDArray[np.intp]:
        used.append(1)
        return real(self, *args, **kw)  # type: ignore[no-any-return]

    monkeypatch.setattr(_Codes, method, spy)
    for seed in range(4):
        q = x[int(allowed[seed * 40])].copy()
        q /= np.linalg.norm(q)
        got = exact.search_rows(x, ids, len(x), quant, q, 10, mask, quantize_from=len(x) + 1)
        best = allowed[_top_k(row_dots(x[allowed], q), ids[allowed], 10)]
        assert [i for i, _ in got] == ids[best].tolist()
    assert len(used) == 4
    # Fewer allowed rows than that: the float32 product over them, no codes.
    monkeypatch.setattr(exact, "FILTERED_CODES_FROM", len(allowed) + 1)
    exact.search_rows(x, ids, len(x), quant, x[0], 10, mask, quantize_from=len(x) + 1)
    assert len(used) == 4
