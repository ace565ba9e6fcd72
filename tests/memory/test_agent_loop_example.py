"""The agent-loop example runs offline end to end and leaves the expected memory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mindfile

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_loop.py"


def test_example_runs_and_remembers(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), str(db)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert '"code": "limit_exceeded"' in out  # the structured error the model recovered from
    assert "Remembering 'Alice is allergic to peanuts.'" in out
    assert "you live in Porto now (before: Lisbon)" in out
    assert "Rolling session summary: Recent condensed turns:" in out
    with mindfile.open(db) as mem:
        [note] = mem.list_notes("memory:alice")
        assert note.note_id.startswith("note-") and note.tags == ("health",)
        assert mem.get_fact("alice", "home", "city").value == "Porto"  # type: ignore[union-attr]
        assert mem.read_summary_state("session-2").epoch == 1  # type: ignore[union-attr]
