"""The int8 kernel of the exact index's scan (:mod:`mindfile.vector.exact`).

``simsimd`` is a core dependency (a ~0.6 MB wheel of SIMD kernels for x86 and Arm, no
dependencies of its own): its int8 dot product reads a 117k x 256 code matrix in ~1 ms
on one core, with the GIL released, where numpy has no int8 kernel at all. Should it be
missing (a platform without a wheel) or ``MINDFILE_NO_SIMSIMD=1`` be set, the index
uses its numpy stages instead: the same results, ~1 ms slower at 117k vectors.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

import numpy as np
import numpy.typing as npt

simsimd: ModuleType | None
try:
    import simsimd
except ImportError:  # pragma: no cover - every supported platform has a wheel
    simsimd = None

__all__ = ["ENABLED", "int8_dots"]

#: Calls :func:`works` makes: a kernel taking one of None's references a call shows.
_PROBES = 64


def int8_dots(query: npt.NDArray[np.int8], rows: npt.NDArray[np.int8]) -> npt.NDArray[np.float32]:
    """``rows[i] . query`` for every row: int8 products summed in int32 (exact), rounded
    once to float32 (exact below 2**24, i.e. always for up to 1,040 dimensions; a
    relative 2**-24 beyond, which the scan's error bound includes). A new writable array
    (a view of simsimd's result)."""
    assert simsimd is not None
    # Never ``out=``: simsimd 6.5 returns None from that form without a reference of
    # its own, so each call took one of None's, and a process died ("Fatal Python
    # error: none_dealloc") after as many searches as None had references (~20k).
    found = simsimd.cdist(query[None], rows, metric="dot", out_dtype="float32")
    return np.asarray(found, dtype=np.float32).reshape(-1)


def works() -> bool:
    """Whether the kernel is there, gives numpy's answer on a small case and leaves
    None's reference count alone (a simsimd release that changed its API, its results
    or its reference counting must not break searches or the process: the numpy stages
    serve instead)."""
    if simsimd is None:
        return False
    rows = np.array([[1, -2, 3, 127], [4, 5, -6, -127]], dtype=np.int8)
    query = np.array([7, 8, -9, 127], dtype=np.int8)
    expected = rows.astype(np.int64) @ query.astype(np.int64)
    try:
        before = sys.getrefcount(None)
        for _ in range(_PROBES):
            out = int8_dots(query, rows)
        spent = before - sys.getrefcount(None)
    except Exception:  # any failure of a third-party kernel: not usable
        return False
    return spent < _PROBES // 2 and bool(np.array_equal(out, expected))


#: Whether searches use the scan (tests switch it off to cover the numpy stages).
ENABLED = os.environ.get("MINDFILE_NO_SIMSIMD", "") in ("", "0") and works()
