"""Cross-validate the time boost's parameters on LoCoMo (docs/retrieval.md, issue 14).

Every turn is stored with ``occurred_at`` = its session's date and each question asked
as of the conversation's last session date. Each question is searched once with the
boost off (``temporal=False``, ``top_k=300``); every configuration of the grid is then
applied offline to those fused candidates with the same code ``search`` runs
(:func:`mindfile.retrieve.temporal.boost`), so a grid of hundreds costs seconds.
Parameters are chosen on conversations 0-4 and reported on 5-9, then swapped.

    python benchmarks/time_cv.py [--no-date] [--json]

``--no-date`` stores turns without the ``[date]`` prefix in their text (time only in
``occurred_at``: what a real chat log looks like).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from collections import defaultdict
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import LOCOMO, emit_json, print_table
from locomo import CATEGORIES, evidence_ids, last_session_time, load_conversation

import mindfile
from mindfile.retrieve.fusion import Fused
from mindfile.retrieve.search import DEFAULT_CANDIDATES
from mindfile.retrieve.temporal import TimeConfig, boost
from mindfile.retrieve.timeq import TimeQuery, parse_time_query

GRID = {
    "weight": (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0),
    "decay_before_days": (1.0, 3.0, 7.0),
    "decay_after_days": (3.0, 14.0, 30.0, 90.0),
    "order_weight": (0.0, 0.02, 0.05, 0.1),
}
HALVES = {"0-4": range(0, 5), "5-9": range(5, 10)}


class Question:
    """One question's boost-free candidates, ready to re-rank under any config."""

    def __init__(self, conv: int, cat: int, gold: set[str], hits: Any, tq: TimeQuery | None):
        self.conv, self.cat, self.gold, self.tq = conv, cat, gold, tq
        self.ids = [set(h.metadata.get("dia_ids") or [h.metadata.get("dia_id", "")]) for h in hits]
        self.scores = [h.score for h in hits]
        self.fused = [
            min(r for r in (h.breakdown.vector_rank, h.breakdown.fts_rank) if r is not None)
            <= DEFAULT_CANDIDATES
            for h in hits
        ]
        self.times = {
            i: datetime.fromisoformat(h.occurred_at).timestamp() for i, h in enumerate(hits)
        }

    def recall(self, cfg: TimeConfig | None, ks: tuple[int, ...] = (10, 50)) -> list[float]:
        order = list(range(len(self.ids)))
        if cfg is not None and self.tq is not None:
            cands = {i: Fused(i, score=self.scores[i]) for i in order if self.fused[i]}
            boost(cands, self.times, self.tq, cfg)
            head = sorted(cands, key=lambda i: (-cands[i].score, i))
            order = head + [i for i in order if not self.fused[i]]
        out = []
        for k in ks:
            found = set().union(*(self.ids[i] for i in order[:k])) & self.gold
            out.append(len(found) / len(self.gold))
        return out


def collect(data: list[dict[str, Any]], *, date_in_text: bool) -> list[Question]:
    questions: list[Question] = []
    with tempfile.TemporaryDirectory() as tmp:
        for c, conv in enumerate(data):
            with mindfile.open(Path(tmp) / f"conv{c}.db") as mem:
                load_conversation(mem, conv, date_in_text=date_in_text, occurred_at=True)
                as_of = last_session_time(conv)
                assert as_of is not None
                for qa in conv["qa"]:
                    gold = evidence_ids(qa)
                    if not gold:
                        continue
                    hits = mem.search(qa["question"], top_k=300, temporal=False, as_of=as_of)
                    tq = parse_time_query(qa["question"], as_of)
                    questions.append(Question(c, int(qa["category"]), gold, hits, tq))
    return questions


def mean(rows: list[float]) -> float:
    return sum(rows) / len(rows) if rows else float("nan")


def evaluate(qs: list[Question], cfg: TimeConfig | None) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    groups: dict[str, list[Question]] = defaultdict(list)
    for q in qs:
        groups["overall"].append(q)
        groups[f"{q.cat} {CATEGORIES[q.cat]}"].append(q)
        if q.tq is not None:
            groups["with a time expression"].append(q)
    for name, grp in groups.items():
        rs = [q.recall(cfg) for q in grp]
        out[name] = {
            "r@10": mean([r[0] for r in rs]),
            "r@50": mean([r[1] for r in rs]),
            "n": len(grp),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(LOCOMO))
    parser.add_argument("--no-date", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--evaluate",
        default="",
        help='no grid: report these TimeConfigs per half, e.g. [{"weight": 0.3}]',
    )
    args = parser.parse_args()
    import json

    data = json.loads(Path(args.data).read_text())
    qs = collect(data, date_in_text=not args.no_date)
    if args.evaluate:
        table = []
        for fields in [None, *json.loads(args.evaluate)]:
            cfg = None if fields is None else TimeConfig(**fields)
            for half, convs in HALVES.items():
                r = evaluate([q for q in qs if q.conv in convs], cfg)
                for group in ("overall", "2 temporal", "with a time expression"):
                    table.append(
                        {"config": "off" if cfg is None else str(fields), "half": half,
                         "questions": group, "n": r[group]["n"],
                         "r@10": round(r[group]["r@10"], 3), "r@50": round(r[group]["r@50"], 3)}
                    )  # fmt: skip
        print_table(table, ["config", "half", "questions", "n", "r@10", "r@50"], "Time boost")
        return
    configs = [TimeConfig(*values) for values in itertools.product(*GRID.values())]
    by_half = {h: [q for q in qs if q.conv in convs] for h, convs in HALVES.items()}
    result: dict[str, Any] = {"date_in_text": not args.no_date, "folds": {}}
    rows = []
    for tune, test in (("0-4", "5-9"), ("5-9", "0-4")):
        scored = []
        for cfg in configs:
            r = evaluate(by_half[tune], cfg)["overall"]
            scored.append((r["r@10"], r["r@50"], cfg))
        best = max(scored, key=lambda x: (round(x[0], 6), round(x[1], 6)))[2]
        base_test, new_test = evaluate(by_half[test], None), evaluate(by_half[test], best)
        result["folds"][f"tune {tune}, test {test}"] = {
            "config": asdict(best),
            "off": base_test,
            "on": new_test,
        }
        for group in base_test:
            rows.append(
                {
                    "tuned on": tune,
                    "tested on": test,
                    "questions": group,
                    "n": base_test[group]["n"],
                    "r@10 off": round(base_test[group]["r@10"], 3),
                    "r@10 on": round(new_test[group]["r@10"], 3),
                    "r@50 off": round(base_test[group]["r@50"], 3),
                    "r@50 on": round(new_test[group]["r@50"], 3),
                }
            )
        print(f"tuned on {tune}: {best}", file=sys.stderr)
    if args.json:
        emit_json(result)
        return
    print_table(
        rows,
        ["tuned on", "tested on", "questions", "n", "r@10 off", "r@10 on", "r@50 off", "r@50 on"],
        f"Time boost, cross-validated (date in text: {not args.no_date})",
    )
    for fold, entry in result["folds"].items():
        print(f"{fold}: {entry['config']}")


if __name__ == "__main__":
    main()
