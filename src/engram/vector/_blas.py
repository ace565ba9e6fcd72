"""Query-time matrix-vector products on one BLAS thread.

A query's product over the whole matrix is memory-bound: a second OpenBLAS thread adds
no bandwidth, and its spin-waiting after the product competes with the other search
leg for the second core. Measured at 100k x 256 on the 2-core CI machine: 3.1 ms on one
thread vs 4.7-12 ms on two. ``threadpoolctl`` limits BLAS for the duration of the call
(process-wide, ~6 us of overhead) and restores the previous setting afterwards.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["matvec"]

_controller: Any = None
_init_lock = threading.Lock()


def _limit() -> Any:
    global _controller
    if _controller is None:
        with _init_lock:
            if _controller is None:
                from threadpoolctl import ThreadpoolController

                _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")


def matvec(matrix: npt.NDArray[np.float32], vector: npt.NDArray[np.float32]) -> Any:
    """``matrix @ vector`` with BLAS limited to one thread."""
    with _limit():
        return matrix @ vector
