"""The int8 kernel of the exact index's scan (:mod:`mindfile.vector.exact`).

``simsimd`` is a core dependency (a ~0.6 MB wheel of SIMD kernels for x86 and Arm, no
dependencies of its own): its int8 dot product reads a 117k x 256 code matrix in ~1 ms
on one core, with the GIL released, where numpy has no int8 kernel at all. Should it be
missing (a platform without a wheel) or ``MINDFILE_NO_SIMSIMD=1`` be set, the index
uses its numpy stages instead: the same results, ~1 ms slower at 117k vectors.
"""

from __future__ import annotations

import os
from types import ModuleType

import numpy as np
import numpy.typing as npt

simsimd: ModuleType | None
try:
    import simsimd
except ImportError:  # pragma: no cover - every supported platform has a wheel
    simsimd = None

__all__ = ["ENABLED", "int8_dots"]


def int8_dots(
    query: npt.NDArray[np.int8], rows: npt.NDArray[np.int8], out: npt.NDArray[np.float32]
) -> None:
    """``out[i] = rows[i] . query``: int8 products summed in int32 (exact), rounded once
    to float32 (exact below 2**24, i.e. always for up to 1,040 dimensions; a relative
    2**-24 beyond, which the scan's error bound includes)."""
    assert simsimd is not None
    simsimd.cdist(query[None], rows, metric="dot", out_dtype="float32", out=out[None])


def works() -> bool:
    """Whether the kernel is there and gives numpy's answer on a small case (a simsimd
    release that changed its API or its results must not break searches: the numpy
    stages serve instead)."""
    if simsimd is None:
        return False
    rows = np.array([[1, -2, 3, 127], [4, 5, -6, -127]], dtype=np.int8)
    query = np.array([7, 8, -9, 127], dtype=np.int8)
    out = np.empty(2, dtype=np.float32)
    try:
        int8_dots(query, rows, out)
    except Exception:  # any failure of a third-party kernel: not usable
        return False
    return bool(np.array_equal(out, rows.astype(np.int64) @ query.astype(np.int64)))


#: Whether searches use the scan (tests switch it off to cover the numpy stages).
ENABLED = os.environ.get("MINDFILE_NO_SIMSIMD", "") in ("", "0") and works()
