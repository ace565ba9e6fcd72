"""One store per agent: :func:`agents` and :class:`AgentStores` (seed 004's
MemoryIndexManager).

    with mindfile.agents("~/.myapp") as stores:
        mem = stores.get("researcher")        # ~/.myapp/memory/researcher.db
        mem.sync(["~/notes"])

``get`` opens (creating if needed) ``<state_dir>/memory/<agent_id>.db`` and returns the
same open :class:`~mindfile.Mindfile` for the same id within the process; ``list`` names
the agents that have a store; ``close``/``close_all`` release them. Agent ids are
letters, digits, ``.``, ``_`` and ``-`` (1-128 characters, not starting with a dot):
never a path.
"""

from __future__ import annotations

import re
import threading
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any

from mindfile.engine import Mindfile
from mindfile.engine import open as _open
from mindfile.errors import InvalidInputError

__all__ = ["AgentStores", "agents"]

_AGENT_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$")


def check_agent_id(agent_id: Any) -> str:
    """``agent_id`` if it is a safe file name, else :class:`InvalidInputError`."""
    if not isinstance(agent_id, str) or not _AGENT_ID.match(agent_id) or ".." in agent_id:
        raise InvalidInputError(
            "agent_id must be 1-128 letters, digits, '.', '_' or '-', not starting with "
            f"'.' and without '..' (got {str(agent_id)[:40]!r})"
        )
    return agent_id


class AgentStores:
    """Per-agent stores under one state directory (see the module docstring)."""

    def __init__(self, state_dir: str | PathLike[str], **options: Any) -> None:
        if not isinstance(state_dir, str | PathLike):
            raise InvalidInputError("state_dir must be a path")
        self.folder = Path(state_dir).expanduser() / "memory"
        self._options = options
        self._open: dict[str, Mindfile] = {}
        self._lock = threading.Lock()

    def path(self, agent_id: str) -> Path:
        return self.folder / f"{check_agent_id(agent_id)}.db"

    def get(self, agent_id: str) -> Mindfile:
        """The agent's store, opened once per process (created if needed)."""
        path = self.path(agent_id)
        with self._lock:
            mem = self._open.get(agent_id)
            if mem is None or mem.db.closed:
                mem = _open(path, **self._options)
                self._open[agent_id] = mem
            return mem

    def list(self) -> list[str]:
        """Agents with a store in the state directory (open or not), sorted."""
        if not self.folder.is_dir():
            return []
        return sorted(
            p.stem for p in self.folder.glob("*.db") if p.is_file() and _AGENT_ID.match(p.stem)
        )

    def close(self, agent_id: str) -> bool:
        """Close the agent's store if it is open here; True if it was."""
        check_agent_id(agent_id)
        with self._lock:
            mem = self._open.pop(agent_id, None)
        if mem is None:
            return False
        mem.close()
        return True

    def close_all(self) -> None:
        with self._lock:
            stores, self._open = list(self._open.values()), {}
        for mem in stores:
            mem.close()

    def __enter__(self) -> AgentStores:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close_all()


def agents(state_dir: str | PathLike[str], **options: Any) -> AgentStores:
    """Per-agent stores under ``state_dir`` (options go to :func:`mindfile.open`)."""
    return AgentStores(state_dir, **options)
