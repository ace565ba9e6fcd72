"""Run as a script: re-embed a store and die (``os._exit``) after N batches.

``python _reembed_child.py DB_PATH NEW_SPEC BATCH_SIZE DIE_AFTER``
"""

from __future__ import annotations

import os
import sys

import mindfile


def main() -> None:
    path, spec, batch_size, die_after = sys.argv[1:5]

    def progress(done: int, total: int) -> None:
        if done >= int(die_after) * int(batch_size):
            os._exit(1)  # like kill -9: no cleanup, no rollback, no release

    with mindfile.open(path) as mem:
        mem.reembed(spec, batch_size=int(batch_size), progress=progress)
    sys.exit("the progress callback should have killed this process")


if __name__ == "__main__":
    main()
