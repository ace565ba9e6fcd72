"""Run as a script: one engine process (``mindfile.open(URL)``) on a shared Postgres store.

``python _engine_child.py MODE URL ARGS...``; prints one JSON line with what it did.
With ``MINDFILE_TEST_GO=PATH`` the child opens its engine, says it is ready, then waits
for PATH to exist, so every child starts writing at the same moment.

* ``mix URL NAME OWN SHARED DONE_DIR`` - store OWN events in session ``own-NAME`` (in
  batches of 5 with ``store_many``) and SHARED events in session ``shared``, each at
  the session's next sequence (retrying on a conflict when another process took it);
  then write ``DONE_DIR/NAME``, wait for every other writer's file, and search for each
  writer's words (full text and hybrid). Prints the sequences it got in ``shared``,
  the conflicts it retried, and what its searches found.
* ``killme URL SESSION MARKER`` - store one committed batch in SESSION, then start a
  second ``store_many`` batch and, inside its transaction after the rows are written,
  write MARKER and sleep until killed (the parent kills it with SIGKILL).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import mindfile
from mindfile.errors import ConflictError


def _start_together() -> None:
    go = os.environ.get("MINDFILE_TEST_GO")
    if not go:
        return
    Path(f"{go}.ready.{os.getpid()}").touch()
    deadline = time.monotonic() + 120
    while not Path(go).exists():
        if time.monotonic() > deadline:
            raise SystemExit("never got the go")
        time.sleep(0.005)


def word(name: str, i: int) -> str:
    """A token only one event holds (the tokenizer keeps letters and digits together)."""
    return f"zq{name}x{i}"


def _next(mem: mindfile.Mindfile, session: str) -> int:
    last = mem.recall(session, 1)
    return last[0].sequence + 1 if last else 1


def mix(url: str, name: str, own: int, shared: int, done_dir: Path) -> dict[str, Any]:
    with mindfile.open(url, embedder="hash") as mem:
        _start_together()
        for start in range(1, own + 1, 5):
            batch = [
                (f"own-{name}", i, f"{name} wrote {word(name, i)} in its own session")
                for i in range(start, min(start + 5, own + 1))
            ]
            mem.store_many(batch)
        got, conflicts = [], 0
        for i in range(shared):
            text = f"{name} shared {word(name, 1000 + i)}"
            while True:
                sequence = _next(mem, "shared")
                try:
                    mem.store("shared", sequence, text)
                except ConflictError:
                    conflicts += 1
                    continue
                got.append(sequence)
                break
        (done_dir / name).touch()
        writers = int(os.environ.get("MINDFILE_TEST_WRITERS", "1"))
        deadline = time.monotonic() + 120
        while len(list(done_dir.iterdir())) < writers:
            if time.monotonic() > deadline:
                raise SystemExit("the other writers never finished")
            time.sleep(0.01)
        others = sorted(p.name for p in done_dir.iterdir())
        found: dict[str, dict[str, bool]] = {}
        for other in others:
            own_word, shared_word = word(other, own), word(other, 1000 + shared - 1)
            found[other] = {
                "fts": any(own_word in h.text for h in mem.search(own_word, mode="fts")),
                "hybrid": any(shared_word in h.text for h in mem.search(shared_word)),
            }
    return {"shared": got, "conflicts": conflicts, "found": found}


def killme(url: str, session: str, marker: Path) -> None:
    with mindfile.open(url, embedder="hash") as mem:
        mem.store_many([(session, i, f"committed {i}") for i in range(1, 4)])
        sessions = mem.stores.sessions
        original = sessions.write_events

        def write_then_hang(*args: Any, **kwargs: Any) -> int:
            added = original(*args, **kwargs)
            marker.write_text("inside the transaction, rows written")
            time.sleep(120)
            return added

        object.__setattr__(sessions, "write_events", write_then_hang)
        mem.store_many([(session, i, f"doomed {i}") for i in range(4, 40)])


def main() -> None:
    mode, url, *args = sys.argv[1:]
    if mode == "mix":
        name, own, shared, done = args
        out: Any = mix(url, name, int(own), int(shared), Path(done))
    elif mode == "killme":
        session, marker = args
        killme(url, session, Path(marker))
        out = None
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
