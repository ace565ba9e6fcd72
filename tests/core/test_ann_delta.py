"""The ANN index's in-memory delta searches with int8 codes once it is large, and gives
exactly the float32 answer through appends, rewrites, a switch to a newer base
(``take_above``) and drops."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from mindfile.vector import _simd, ann_delta
from mindfile.vector.ann_delta import Delta
from mindfile.vector.ann_disk import RowBatch, session_key
from mindfile.vector.base import row_dots
from mindfile.vector.exact import _Codes

from .test_exact_codes import clustered, near_queries

DIMS = 32


def _batch(ids: list[int], matrix: npt.NDArray[np.float32]) -> RowBatch:
    sessions = [f"s{i % 7}" for i in ids]
    return RowBatch(np.asarray(ids, dtype=np.int64), matrix, sessions, np.zeros(len(ids), np.int64))


def _oracle(
    held: dict[int, npt.NDArray[np.float32]],
    q: npt.NDArray[np.float32],
    k: int,
    sessions: set[str] | None = None,
) -> list[tuple[int, float]]:
    ids = sorted(i for i in held if sessions is None or f"s{i % 7}" in sessions)
    if not ids:
        return []
    scores = row_dots(np.stack([held[i] for i in ids]), q)  # the indexes' own product
    order = sorted(range(len(ids)), key=lambda j: (-float(scores[j]), -ids[j]))[:k]
    return [(ids[j], float(scores[j])) for j in order]


def _check(delta: Delta, held: dict[int, npt.NDArray[np.float32]], seed: int) -> None:
    x = np.stack([held[i] for i in sorted(held)])
    for q in near_queries(x, seed, n=4):
        for k, sessions in ((10, None), (40, None), (10, {"s1", "s4"})):
            keys = None if sessions is None else [session_key(s) for s in sorted(sessions)]
            got = delta.search(q, k, keys, None)
            want = _oracle(held, q, k, sessions)
            assert [i for i, _ in got] == [i for i, _ in want]
            assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-6)


@pytest.fixture
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ann_delta, "CODES_AT", 64)
    monkeypatch.setattr(ann_delta, "QUANTIZE_FROM", 200)


@pytest.mark.usefixtures("small_thresholds")
def test_a_large_delta_searches_its_codes_and_finds_the_float32_top_k(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scanned: list[str] = []  # the int8 scan, or the numpy stages without simsimd
    for name in ("scan", "search"):
        real = getattr(_Codes, name)

        def counting(*args: object, _real: object = real, _name: str = name) -> object:
            scanned.append(_name)
            return _real(*args)  # type: ignore[operator]

        monkeypatch.setattr(_Codes, name, counting)
    x = clustered(1200, DIMS, seed=3)
    held: dict[int, npt.NDArray[np.float32]] = {}
    delta = Delta(DIMS, None)
    # Appends in pages, as a catch-up reads them: the codes are fitted at 64 rows.
    for lo in range(0, 600, 50):
        ids = list(range(lo + 1, lo + 51))
        delta.put(_batch(ids, x[lo : lo + 50]))
        held.update(zip(ids, x[lo : lo + 50], strict=True))
    assert delta._codes is not None
    _check(delta, held, seed=1)
    assert scanned, "600 rows (over QUANTIZE_FROM) are searched through the codes"
    # Rewritten vectors (a re-embed), one of them far from where it was.
    again = [5, 77, 300, 599]
    moved = x[900:904].copy()
    delta.put(_batch(again, moved))
    held.update(zip(again, moved, strict=True))
    _check(delta, held, seed=2)
    # Rows out of id order (below the highest held) and new ones above it.
    late = [1000, 1001, 1002]
    delta.put(_batch([*late, 2000], x[1000:1004]))
    held.update(zip([*late, 2000], x[1000:1004], strict=True))
    _check(delta, held, seed=3)
    # Dropped rows (deleted since): the codes follow the compaction.
    gone = [2, 3, 50, 1001, 2000]
    delta.drop(gone)
    for i in gone:
        held.pop(i)
    _check(delta, held, seed=4)
    # A switch to a newer base holding ids up to 400: the new delta keeps the rest,
    # with their codes (the same rows, not encoded again).
    newer = Delta(DIMS, None)
    newer.take_above(delta, 400)
    assert newer._codes is not None
    above = {i: v for i, v in held.items() if i > 400}
    _check(newer, above, seed=5)
    more = list(range(3000, 3100))
    newer.put(_batch(more, x[1100:1200]))
    above.update(zip(more, x[1100:1200], strict=True))
    _check(newer, above, seed=6)


@pytest.mark.usefixtures("small_thresholds")
def test_a_small_delta_keeps_no_codes() -> None:
    x = clustered(100, DIMS, seed=5)
    delta = Delta(DIMS, None)
    delta.put(_batch(list(range(1, 61)), x[:60]))
    assert delta._codes is None
    newer = Delta(DIMS, None)
    newer.take_above(delta, 10)
    assert newer._codes is None
    _check(newer, {i + 1: x[i] for i in range(10, 60)}, seed=7)
    delta.put(_batch(list(range(61, 101)), x[60:]))  # crosses CODES_AT: fitted on all
    assert delta._codes is not None
    _check(delta, {i + 1: x[i] for i in range(100)}, seed=8)


@pytest.mark.usefixtures("small_thresholds")
def test_codes_without_sign_bits_when_the_scan_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """With simsimd the delta's codes keep no sign bits (their BLAS product is the cost);
    should the scan be switched off later, searches fall back to float32, not to the
    stages that need the bits."""
    monkeypatch.setattr(_simd, "ENABLED", True)
    x = clustered(600, DIMS, seed=9)
    delta = Delta(DIMS, None)
    delta.put(_batch(list(range(1, 601)), x))
    assert delta._codes is not None and not delta._codes.has_bits
    held = {i + 1: x[i] for i in range(600)}
    monkeypatch.setattr(_simd, "ENABLED", False)
    monkeypatch.setattr(_Codes, "search", lambda *a: pytest.fail("the stages need sign bits"))
    _check(delta, held, seed=10)


@pytest.mark.usefixtures("small_thresholds")
def test_codes_keep_sign_bits_for_the_numpy_stages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_simd, "ENABLED", False)
    x = clustered(600, DIMS, seed=11)
    delta = Delta(DIMS, None)
    delta.put(_batch(list(range(1, 601)), x))
    assert delta._codes is not None and delta._codes.has_bits
    _check(delta, {i + 1: x[i] for i in range(600)}, seed=12)
