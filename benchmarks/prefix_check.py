"""Do the best results depend on how many are asked for? (issue 16, part 2)

    python benchmarks/prefix_check.py [--conversation 0] [--json]

For every question of one LoCoMo conversation, compares ``search(q, top_k=10)`` with
the first 10 of ``search(q, top_k=50)`` (default hybrid search, bundled model) and
counts the questions whose top 10 differ as a set and in order. Both must be 0.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _common import emit_json, print_table
from locomo import DEFAULT_DATA, load_conversation

import mindfile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--conversation", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    conv = json.loads(Path(args.data).read_text())[args.conversation]
    rows = []
    with tempfile.TemporaryDirectory() as tmp, mindfile.open(Path(tmp) / "c.db") as mem:
        load_conversation(mem, conv, date_in_text=True)
        for mode, fusion in (("hybrid", "weighted"), ("hybrid", "rrf"), ("vector", "weighted")):
            sets = orders = 0
            questions = [qa["question"] for qa in conv["qa"]]
            for q in questions:
                a = [h.chunk_id for h in mem.search(q, top_k=10, mode=mode, fusion=fusion)]
                b = [h.chunk_id for h in mem.search(q, top_k=50, mode=mode, fusion=fusion)][:10]
                sets += set(a) != set(b)
                orders += a != b
            rows.append(
                {
                    "mode": f"{mode}/{fusion}",
                    "questions": len(questions),
                    "top10_sets_differ": sets,
                    "top10_order_differs": orders,
                }
            )
    if args.json:
        emit_json(rows)
    else:
        cols = ["mode", "questions", "top10_sets_differ", "top10_order_differs"]
        print_table(
            rows, cols, f"top_k=10 vs first 10 of top_k=50, conversation {args.conversation}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
