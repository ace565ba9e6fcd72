"""Run as a script: sync a folder and die (``os._exit``) after N files were committed.

``python _sync_child.py DB_PATH FOLDER N``
"""

from __future__ import annotations

import importlib
import os
import sys

import mindfile

# The module (mindfile.files.sync is also the name of the function the package exports).
sync_module = importlib.import_module("mindfile.files.sync")


def main() -> None:
    path, folder, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    original = sync_module._commit
    done = [0]

    def commit_then_maybe_die(*args: object, **kwargs: object) -> None:
        original(*args, **kwargs)  # type: ignore[arg-type]
        done[0] += 1
        if done[0] >= limit:
            os._exit(1)  # like kill -9, between two files' transactions

    sync_module._commit = commit_then_maybe_die  # type: ignore[assignment]
    with mindfile.open(path, embedder="hash") as mem:
        mem.sync([folder])
    sys.exit("should have died")


if __name__ == "__main__":
    main()
