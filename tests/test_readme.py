"""Every Python snippet in the README runs as written (in a scratch directory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_the_readme_has_snippets() -> None:
    assert len(SNIPPETS) >= 2


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_snippet_runs(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(SNIPPETS[index], f"README.md snippet {index}", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert out.strip(), "a README snippet should show its result"
    if "allergic" in SNIPPETS[index]:
        assert "allergic to peanuts" in out.lower()
