"""Run as a script: a worker that claims a batch and dies in the middle of embedding it.

``python _crash_child.py DB_PATH DIMS MARKER BATCH_SIZE`` - writes how many texts it was
given to MARKER, then ``os._exit(1)``: no cleanup, no rollback, no lease release, like a
killed process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

import mindfile
from mindfile.embed import HashEmbedder
from mindfile.jobs import JobPolicy


class DiesMidJob:
    def __init__(self, dims: int, marker: Path) -> None:
        self._inner = HashEmbedder(dims)
        self._marker = marker

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dimensions(self) -> int:
        return self._inner.dimensions

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self._marker.write_text(str(len(texts)))
        os._exit(1)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self._inner.embed_query(text)


def main() -> None:
    path, dims, marker, batch_size = sys.argv[1:5]
    mem = mindfile.open(path, embedder=DiesMidJob(int(dims), Path(marker)))
    mem.run_jobs(batch_size=int(batch_size), policy=JobPolicy(lease_seconds=60))
    sys.exit("the embedder should have killed this process")


if __name__ == "__main__":
    main()
