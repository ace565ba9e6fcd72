"""What a context's scope costs: one resolution per context, read from an index."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import mindfile
from mindfile.context.retrieval import resolve_scope
from mindfile.retrieve import retriever
from mindfile.storage.backend import recall_store
from mindfile.storage.recall import SALIENT


def _store(mem: mindfile.Mindfile) -> None:
    mem.store_many(
        [(f"s{i % 20}", i, f"note {i}: the garden, the tomatoes and the rain") for i in range(400)],
        user_id="maya",
    )
    mem.rebuild_index()


def test_a_context_resolves_its_scope_once(
    store_location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The legs and the feedback query (a budget for more than ten memories) share one
    resolution of the scope into rowids."""
    calls: list[object] = []
    resolve = retriever.ReadFilter.resolve

    def counted(self: retriever.ReadFilter, db: object) -> object:
        calls.append(self)
        return resolve(self, db)  # type: ignore[arg-type]

    monkeypatch.setattr(retriever.ReadFilter, "resolve", counted)
    with mindfile.open(store_location) as mem:
        _store(mem)
        calls.clear()
        ctx = mem.build_context("asking", "tomatoes in the rain", token_budget=4000, user_id="maya")
        assert sum(1 for i in ctx.items if i.source == "memory") > 10  # feedback ran
    assert len(calls) == 1


def test_the_scope_is_read_from_the_covering_index(tmp_path: Path) -> None:
    """Migration 0017: the scope's rowids and its salient chunks come from
    ``idx_chunks_scope`` alone, not from the chunk rows (text inline)."""
    with mindfile.open(tmp_path / "scope.db") as mem:
        _store(mem)
        now = datetime.now(UTC)
        scope = resolve_scope(
            mem.db,
            "asking",
            user_id="maya",
            agent_identity=None,
            channel=None,
            cross_session=True,
            include_files=False,
            cutoff=now - timedelta(days=90),
            now=now,
            recent_from=None,
        )
        where, params = recall_store(mem.db).scope_condition(scope)
        for sql, args in (
            (f"SELECT c.id FROM chunks AS c WHERE {where}", params),
            (SALIENT.format(where=where), [*params, 0.85, 12]),
        ):
            plan = " ".join(str(r[-1]) for r in mem.db.query(f"EXPLAIN QUERY PLAN {sql}", args))
            assert "COVERING INDEX idx_chunks_scope" in plan, plan
            assert "SCAN c" not in plan, plan
