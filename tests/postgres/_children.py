"""Child processes that start writing at the same moment (the Postgres multi-process
tests): each waits, after its setup, for a file to appear, then prints one JSON answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def run_children(
    child: Path,
    *argvs: list[str],
    env: dict[str, str] | None = None,
    timeout: float = 120,
    during: Callable[[], None] | None = None,
) -> list[object]:
    """Run ``child`` once per argv; once every one is ready (it touched
    ``$MINDFILE_TEST_GO.ready.*``), start them together; their JSON answers, in order.
    ``during`` is called in a loop while any child still runs."""
    go = Path(tempfile.mkdtemp(prefix="mindfile-go-")) / "go"
    full_env = {**os.environ, **(env or {}), "MINDFILE_TEST_GO": str(go)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(child), *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
        )
        for argv in argvs
    ]
    answers = []
    try:
        deadline = time.monotonic() + timeout
        while len(list(go.parent.glob("go.ready.*"))) < len(procs):
            for p in procs:
                if p.poll() is not None:
                    _, err = p.communicate()
                    raise AssertionError(f"a child died before it was ready: {err.decode()}")
            assert time.monotonic() < deadline, "the children never got ready"
            time.sleep(0.02)
        go.touch()
        while during is not None and any(p.poll() is None for p in procs):
            during()
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, err.decode()
            answers.append(json.loads(out.decode().strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        shutil.rmtree(go.parent, ignore_errors=True)
    return answers
