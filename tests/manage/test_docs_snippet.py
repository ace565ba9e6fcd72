"""The runnable snippet in docs/memory-management.md keeps running."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import mindfile

DOC = Path(__file__).resolve().parents[2] / "docs" / "memory-management.md"


def test_the_quick_start_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    match = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert match is not None
    monkeypatch.chdir(tmp_path)  # the snippet writes ./agent.db
    exec(compile(match.group(1), str(DOC), "exec"), {"__name__": "__snippet__"})
    with mindfile.open(tmp_path / "agent.db") as mem:
        assert mem.get_quota("agent:planner") is not None
        assert mem.db.scalar("SELECT pinned FROM chunks WHERE chunk_text LIKE '%passport%'") == 1
        assert mem.db.scalar("SELECT access_count FROM chunks WHERE pinned = 1") == 1
