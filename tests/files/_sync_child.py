"""Run as a script: sync a folder and die (``os._exit``, like ``kill -9``).

``python _sync_child.py DB_PATH FOLDER N between``: one file per transaction, die after
N transactions committed. ``... N inside``: the default grouping, die while the Nth file's
chunks are written, its transaction (with the files sharing it) still open.
"""

from __future__ import annotations

import importlib
import os
import sys

import mindfile

# The module (mindfile.files.sync is also the name of the function the package exports).
sync_module = importlib.import_module("mindfile.files.sync")


def main() -> None:
    path, folder, limit, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    name = "_commit" if mode == "between" else "_write_file"
    original = getattr(sync_module, name)
    done = [0]

    def call_then_maybe_die(*args: object, **kwargs: object) -> object:
        result = original(*args, **kwargs)
        done[0] += 1
        if done[0] >= limit:
            os._exit(1)
        return result

    if mode == "between":
        sync_module.COMMIT_CHUNKS = 1  # type: ignore[attr-defined]
    setattr(sync_module, name, call_then_maybe_die)
    with mindfile.open(path, embedder="hash") as mem:
        mem.sync([folder])
    sys.exit("should have died")


if __name__ == "__main__":
    main()
