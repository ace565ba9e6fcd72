"""The async shell (issue 12): same API as coroutines, concurrent, cancellation-safe."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import mindfile
from mindfile.aio import ASYNC_METHODS, AsyncMindfile
from mindfile.errors import ConflictError, NotFoundError

ROOT = Path(__file__).resolve().parents[2]


def test_every_sync_method_is_a_coroutine_with_the_same_signature() -> None:
    public = {
        n for n, m in inspect.getmembers(mindfile.Mindfile) if not n.startswith("_") and callable(m)
    }
    assert set(ASYNC_METHODS) | {"close"} == public
    for name in ASYNC_METHODS:
        method = getattr(AsyncMindfile, name)
        assert inspect.iscoroutinefunction(method), name
        assert inspect.signature(method) == inspect.signature(getattr(mindfile.Mindfile, name))
    assert inspect.iscoroutinefunction(AsyncMindfile.close)


def test_the_type_stub_is_up_to_date() -> None:
    check = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_async_stub.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr


def test_round_trip(store_location: str, tmp_path: Path) -> None:
    async def main() -> None:
        async with await mindfile.aopen(store_location, embedder="hash") as mem:
            await mem.store("chat", 1, {"role": "user", "content": "I moved to Lisbon in May"})
            await mem.store_note("memory:al", "n1", "Al likes trains", tags=["travel"])
            await mem.set_fact("al", "home", "city", "Lisbon")
            hits = await mem.search("Lisbon", top_k=5)
            assert {h.text for h in hits} >= {"I moved to Lisbon in May"}
            ctx = await mem.build_context("chat", "where do I live", token_budget=300)
            assert any("Lisbon" in str(m["content"]) for m in ctx.messages)
            assert [r.sequence for r in await mem.recall("chat")] == [1]
            fact = await mem.get_fact("al", "home", "city")
            assert fact is not None and fact.value == "Lisbon"
            with pytest.raises(ConflictError):  # typed errors come through unchanged
                await mem.store("chat", 1, "same sequence again")
        with pytest.raises(NotFoundError):
            await mindfile.aopen(tmp_path / "missing.db", read_only=True)

    asyncio.run(main())


def test_many_concurrent_calls(store_location: str) -> None:
    async def main() -> None:
        mem = await mindfile.aopen(store_location, embedder="hash")
        try:
            # One session per write: threads may run them in any order.
            writes = [mem.store(f"s{i}", 1, f"message {i} about topic{i % 7}") for i in range(100)]
            reads = [mem.search(f"topic{i % 7}", top_k=3) for i in range(100)]
            results = await asyncio.gather(*writes, *reads)
            assert all(r == 1 for r in results[:100])  # one chunk each
            assert len(await mem.list_sessions()) == 100
        finally:
            await mem.close()

    asyncio.run(main())


def test_a_cancelled_write_happens_completely_or_not_at_all(store_location: str) -> None:
    async def main() -> None:
        mem = await mindfile.aopen(store_location, embedder="hash")
        try:
            batch = [("bulk", i, f"line {i} " * 40) for i in range(1, 2001)]
            task = asyncio.create_task(mem.store_many(batch))
            await asyncio.sleep(0.005)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The worker thread finishes its transaction; poll until it has.
            for _ in range(200):
                stored = len(await mem.recall("bulk"))
                if stored in (0, 2000):
                    break
                await asyncio.sleep(0.05)
            assert stored in (0, 2000)
            await asyncio.sleep(0.5)
            # Never a part of the batch; and the store is consistent once the count
            # holds still (on a loaded machine the commit may land later still, between
            # two reads of one reconcile: then it is checked again).
            for _ in range(100):
                stored = len(await mem.recall("bulk"))
                assert stored in (0, 2000)
                report = await mem.reconcile(repair=False)
                if report.consistent and len(await mem.recall("bulk")) == stored:
                    break
                await asyncio.sleep(0.1)
            assert report.consistent
        finally:
            await mem.close()

    asyncio.run(main())
