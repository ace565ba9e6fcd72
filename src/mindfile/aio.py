"""The async shell: :func:`aopen` and :class:`AsyncMindfile`.

Every public method of :class:`~mindfile.Mindfile` exists on :class:`AsyncMindfile` as a
coroutine with the same name, parameters and result (generated from the sync class at
import time, so the two cannot drift; ``aio.pyi`` gives type checkers the same view and
a test keeps it in step). A call runs the sync method in a worker thread
(``asyncio.to_thread``): the event loop never blocks on SQLite or the embedder, and
threads share the one engine safely (docs/architecture.md).

**Cancellation.** Cancelling the awaiting task does not interrupt the worker thread: the
call runs to its end, and a write is one transaction, so it either happens completely
or not at all — never half. The cancelled caller does not learn which; read it back
(``recall``, ``get_note``...) if it matters. ``close()`` waits for nothing in flight:
close only after your tasks are done.

    async with await mindfile.aopen("agent.db") as mem:
        await mem.store("chat", 1, {"role": "user", "content": "I moved to Lisbon"})
        hits = await mem.search("where do I live?")
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any

from mindfile.engine import Mindfile
from mindfile.engine import open as _open

__all__ = ["ASYNC_METHODS", "AsyncMindfile", "aopen"]

#: Sync methods that are not coroutines here (lifecycle is handled separately).
_NOT_WRAPPED = frozenset({"close"})

#: The public methods of :class:`Mindfile`, each a coroutine on :class:`AsyncMindfile`.
ASYNC_METHODS = tuple(
    sorted(
        name
        for name, member in inspect.getmembers(Mindfile)
        if not name.startswith("_") and callable(member) and name not in _NOT_WRAPPED
    )
)


class AsyncMindfile:
    """A :class:`Mindfile` whose methods are coroutines (see the module docstring).

    ``engine`` is the underlying engine (for code that must stay synchronous, e.g. inside a
    worker thread of your own).
    """

    def __init__(self, engine: Mindfile) -> None:
        self.engine = engine

    @property
    def path(self) -> str:
        return self.engine.path

    async def close(self) -> None:
        """Close the store (in a worker thread: ``close`` may purge, see docs/privacy.md)."""
        await asyncio.to_thread(self.engine.close)

    async def __aenter__(self) -> AsyncMindfile:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncMindfile({self.engine.path!r})"


def _coroutine(name: str) -> Callable[..., Coroutine[Any, Any, Any]]:
    method = getattr(Mindfile, name)

    @functools.wraps(method)
    async def call(self: AsyncMindfile, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self.engine, name), *args, **kwargs)

    call.__doc__ = f"Async :meth:`mindfile.Mindfile.{name}`.\n\n{method.__doc__ or ''}"
    return call


for _name in ASYNC_METHODS:
    setattr(AsyncMindfile, _name, _coroutine(_name))


async def aopen(path: str | Path = ":memory:", **options: Any) -> AsyncMindfile:
    """:func:`mindfile.open` in a worker thread (loading the model takes ~0.3 s)."""
    sync = await asyncio.to_thread(functools.partial(_open, path, **options))
    return AsyncMindfile(sync)
