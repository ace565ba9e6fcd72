"""Who holds a job lease, and whether that worker still exists.

A lease names its holder ``host:pid:start:thread`` (``start`` is the process's start
time in clock ticks since boot, from ``/proc/<pid>/stat``; ``0`` where there is no
``/proc``). A worker killed with ``kill -9`` cannot hand its jobs back, so every claim
and :func:`mindfile.Mindfile.reconcile` ask :func:`owner_gone` about the holders of
running jobs: a holder on this host whose process no longer exists, or whose pid now
belongs to a process started at another time (pid reuse), is gone, and its jobs are
recovered at once instead of after ``lease_seconds``.

A holder on another host, or a custom ``worker_id`` that is not in this format, cannot
be checked from here: its jobs wait for the lease to expire, as before.
"""

from __future__ import annotations

import functools
import os
import socket
import threading
from pathlib import Path

__all__ = ["default_worker_id", "owner_gone", "process_start", "process_tag"]


def process_start(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot), or None if unknown.

    Returns None when the process does not exist or the platform has no ``/proc``.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # Field 2 (the command name) is in parentheses and may hold spaces or ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 of the whole line
    except (IndexError, ValueError):
        return None


@functools.cache
def _host() -> str:
    return socket.gethostname().replace(":", "_")


def process_tag() -> str:
    """``host:pid:start`` of this process (computed per call: a fork has a new pid)."""
    pid = os.getpid()
    return f"{_host()}:{pid}:{process_start(pid) or 0}"


def default_worker_id() -> str:
    """``host:pid:start:thread``: who holds a lease (shown by ``mindfile jobs status``)."""
    return f"{process_tag()}:{threading.get_ident()}"


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return True  # cannot tell: assume alive, the lease still expires
    return True


def owner_gone(claimed_by: str | None) -> bool:
    """Whether the lease holder ``claimed_by`` is certainly dead (False: alive or unknown)."""
    if not claimed_by:
        return False
    parts = claimed_by.split(":")
    if len(parts) < 4 or parts[0] != _host():
        return False
    pid_text, start_text = parts[1], parts[2]
    if not (pid_text.isdigit() and start_text.isdigit()):
        return False
    pid, start = int(pid_text), int(start_text)
    if pid <= 0:
        return False
    if start == 0:  # no /proc where the lease was taken: the pid is all we know
        return not _pid_exists(pid)
    actual = process_start(pid)
    if actual is None:
        return not _pid_exists(pid)
    return actual != start
