"""The quick-start snippet in docs/context.md keeps running and says what it claims."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "context.md"


def test_the_quick_start_snippet_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    match = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert match is not None
    monkeypatch.chdir(tmp_path)  # the snippet writes ./agent.db
    exec(compile(match.group(1), str(DOC), "exec"), {"__name__": "__snippet__"})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "memory 44 lexical match (BM25 top 5) and among the best of search's ranking "
        "(relevance 1.40); final 0.95 = 0.70×relevance 1.00 + 0.20×1.00 + 0.10×0.50"
    )
    assert len(out) == 5  # the trains note is unrelated: no BM25 match, cosine below the floor
    assert out[1] == "recent 18 latest turn #1 (newest first) of the last 10"
    assert out[2] == "Relevant memories:"
    assert re.fullmatch(r"Session monday \(\d{4}-\d\d-\d\d\):", out[3])
    assert out[4].endswith(
        ", user) By the way, I'm severely allergic to "
        "peanuts, so please never suggest recipes with them."
    )
