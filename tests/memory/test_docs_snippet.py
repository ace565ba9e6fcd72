"""The runnable snippet in docs/agent-memory.md keeps running."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "agent-memory.md"


def test_the_quick_start_snippet_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    match = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert match is not None
    monkeypatch.chdir(tmp_path)  # the snippet writes ./agent.db
    exec(compile(match.group(1), str(DOC), "exec"), {"__name__": "__snippet__"})
    out = capsys.readouterr().out
    assert "Lisbon" in out and "True Alice is allergic to peanuts." in out
    assert (tmp_path / "agent.db").exists()
