"""Lease holders: who is alive (mindfile.jobs.owner)."""

from __future__ import annotations

import os
import subprocess
import sys

from mindfile.jobs.owner import default_worker_id, owner_gone, process_start, process_tag


def test_this_process_is_alive() -> None:
    assert not owner_gone(default_worker_id())
    assert not owner_gone(f"{process_tag()}:123:index-worker-0")


def test_a_finished_process_is_gone() -> None:
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "from mindfile.jobs.owner import default_worker_id as d; print(d())",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    holder = child.stdout.strip()
    assert holder.split(":")[1] != str(os.getpid())
    assert owner_gone(holder)


def test_a_reused_pid_is_gone() -> None:
    # Our pid, but a process started at another time: the old holder is dead.
    host, pid, start = process_tag().split(":")
    if process_start(os.getpid()) is None:  # no /proc: only the pid can be checked
        assert not owner_gone(f"{host}:{pid}:{start}:1")
        return
    assert owner_gone(f"{host}:{pid}:{int(start) + 1}:1")


def test_unverifiable_holders_are_not_declared_dead() -> None:
    _, pid, start = process_tag().split(":")
    for holder in (
        None,
        "",
        "my-worker",
        "w",
        f"another-host:{pid}:{start}:1",
        "another-host:999999999:1:1",
        f"{process_tag()}",  # too few parts
        "x:y:z:w",
    ):
        assert not owner_gone(holder), holder
