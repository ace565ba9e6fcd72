"""The quick-start snippet in docs/background-indexing.md keeps running."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "background-indexing.md"


def test_the_quick_start_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    match = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert match is not None
    monkeypatch.chdir(tmp_path)  # the snippet writes ./agent.db
    namespace: dict[str, object] = {"__name__": "__snippet__"}
    exec(compile(match.group(1), str(DOC), "exec"), namespace)
    mem = namespace["mem"]
    hits = namespace["hits"]
    try:
        assert [h.text for h in hits] == ["I moved to Lisbon in May."]  # type: ignore[attr-defined]
        mem.run_jobs()  # type: ignore[attr-defined]  # whatever the worker had not done yet
        assert mem.job_status().backlog == 0  # type: ignore[attr-defined]
        assert mem.search("Lisbon").degraded is None  # type: ignore[attr-defined]
    finally:
        mem.close()  # type: ignore[attr-defined]
