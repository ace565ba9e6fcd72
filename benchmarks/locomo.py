"""LoCoMo retrieval benchmark: does Mindfile find the evidence turns for each question?

One store per conversation; every turn is one event in its session, stored as
``[session date] Speaker: text`` (plus ``[image: caption]`` when the turn shares a
photo), with ``dia_id``, ``speaker``, ``date`` and ``author`` (the speaker: author match,
docs/retrieval.md) in metadata. Each question's text is
the query over the whole conversation. A hit is an evidence ``dia_id`` inside a
retrieved chunk; recall@k is the fraction of a question's evidence found in the top k.

    python benchmarks/locomo.py --data ../shared/data/locomo/locomo10.json [--json]

Time-aware retrieval (docs/retrieval.md): ``--occurred-at`` stores every turn with
``occurred_at`` = its session's date, ``--as-of last-session`` asks each question as of
the conversation's last session date (the default ``now`` is the wall clock), and
``--no-temporal`` turns the time boost off; ``--time-config '{"weight": 0.2}'`` sets
TimeConfig fields. ``--no-preferences`` turns preference recall off,
``--preference-config '{"limit": 20}'`` sets PreferenceConfig fields. ``--no-neighbors`` turns
neighbour smoothing off (search and build_context), ``--neighbor-config '{"weight": 0.3}'``
sets NeighborConfig fields. ``--no-token-match`` turns token match off (search and
build_context), ``--token-match-config '{"weight": 0.3}'`` sets TokenMatchConfig fields.
``--no-feedback`` turns feedback off (search), ``--feedback-config '{"WEIGHT": 0.5}'`` sets
the constants of mindfile.retrieve.feedback (DOCS, TERMS, WEIGHT, SHARPNESS).
``--no-authors`` stores the turns without ``metadata["author"]`` (no author match),
``--author-weight 0.3`` sets its lift (mindfile.retrieve.authors.WEIGHT).

The data (CC BY-NC 4.0) is read from its path and never copied into this repository.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import LOCOMO, emit_json, machine_info, print_table
from _pg import postgres

import mindfile
from mindfile.retrieve.preferences import backfill as backfill_statements
from mindfile.retrieve.token_match import backfill as backfill_token_sets
from mindfile.retrieve.token_match import matcher_for
from mindfile.tokens import estimate_tokens

DEFAULT_DATA = LOCOMO
KS = (5, 10, 25, 50)
BUDGETS = (1000, 2000)
#: build_context budgets for the "context" mode: evidence present in the context.
CONTEXT_BUDGETS = (1000, 2000, 4000)
CONTEXT_METRICS = [f"ctx@{b}" for b in CONTEXT_BUDGETS] + [f"mem@{b}" for b in CONTEXT_BUDGETS]
#: Every turn is stored for one user, so a context built in a fresh session of that user
#: may recall any session of the conversation (docs/privacy.md: no user, no crossing).
USER = "locomo-user"
#: ``--context-config '{"hybrid_floor": 0.4}'`` (ContextConfig fields) for tuning.
CONTEXT_CONFIG: Any = None
HIT_OVERHEAD_TOKENS = 4
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
METRICS = [f"r@{k}" for k in KS] + [f"r@{b}tok" for b in BUDGETS] + ["ndcg@10", "mrr"]
ANCHORS = {
    "DRAGON (paper)": {"r@5": 0.567, "r@10": 0.662, "r@25": 0.767, "r@50": 0.827},
    "BM25+date (paper)": {"r@5": 0.543, "r@10": 0.611, "r@25": 0.692, "r@50": 0.735},
}
_DIA = re.compile(r"D\d+:\d+")


def session_time(text: str) -> datetime | None:
    """A LoCoMo session date (``1:56 pm on 8 May, 2023``) as an aware UTC datetime."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def last_session_time(conv: dict[str, Any]) -> datetime | None:
    c = conv["conversation"]
    times = [session_time(v) for k, v in c.items() if k.endswith("_date_time")]
    return max((t for t in times if t is not None), default=None)


def turn_text(turn: dict[str, Any], date: str, *, date_in_text: bool) -> str:
    text = f"{turn['speaker']}: {turn.get('text', '')}"
    if turn.get("blip_caption"):
        text += f" [image: {turn['blip_caption']}]"
    return f"[{date}] {text}" if date_in_text else text


def load_conversation(
    mem: mindfile.Mindfile,
    conv: dict[str, Any],
    *,
    date_in_text: bool,
    long: int = 0,
    session_prefix: str = "",
    occurred_at: bool = False,
    no_authors: bool = False,
) -> int:
    """Store every turn (in sessions ``{session_prefix}session_N``); returns the number of
    turns.

    With ``long`` > 0, consecutive turns of a session are merged into messages of at
    least ``long`` characters (realistic assistant chat averages ~1,000), each message
    listing its turns in ``metadata["dia_ids"]``; a hit then counts for every turn of
    its message.
    """
    c = conv["conversation"]
    events: list[tuple[str, int, Any, dict[str, Any], datetime | None]] = []
    turns = 0
    n = 1
    while f"session_{n}" in c:
        date = c.get(f"session_{n}_date_time", "")
        when = session_time(date) if occurred_at else None
        parts: list[str] = []
        ids: list[str] = []
        for seq, turn in enumerate(c[f"session_{n}"], start=1):
            turns += 1
            text = turn_text(turn, date, date_in_text=date_in_text)
            if not long:
                meta = {
                    "dia_id": turn["dia_id"],
                    "speaker": turn["speaker"],
                    "date": date,
                    **({} if no_authors else {"author": turn["speaker"]}),
                }
                events.append((f"{session_prefix}session_{n}", seq, text, meta, when))
                continue
            parts.append(text)
            ids.append(turn["dia_id"])
            if sum(len(p) for p in parts) >= long:
                sid = f"{session_prefix}session_{n}"
                events.append((sid, len(events) + 1, "\n".join(parts), {"dia_ids": ids}, when))
                parts, ids = [], []
        if parts:
            sid = f"{session_prefix}session_{n}"
            events.append((sid, len(events) + 1, "\n".join(parts), {"dia_ids": ids}, when))
        n += 1
    mem.store_many(events, user_id=USER)
    # A bulk write leaves preference statements and token sets to the backfills
    # (docs/retrieval.md): run them now, so every question sees the store as it is a
    # moment after an import.
    backfill_statements(mem.db, pause=0.0)
    matcher = matcher_for(mem.embedder)  # and the word pieces (token match), likewise
    if matcher is not None:
        backfill_token_sets(mem.db, matcher, pause=0.0)
    # And the BM25 index built here: otherwise the first questions rank with FTS5 while
    # it builds in the background (the same BM25) and skip feedback, which needs it, as
    # many of them as the build took (results varied from run to run).
    if mem.lexical is not None:
        mem.lexical.size()
    return turns


def evidence_ids(qa: dict[str, Any]) -> set[str]:
    return {m for ev in qa.get("evidence", []) for m in _DIA.findall(str(ev))}


def pack(texts: list[str], budget: int) -> list[int]:
    """Indexes of ranked hits that fit in ``budget`` tokens (skip what doesn't fit)."""
    used, kept = 0, []
    for i, text in enumerate(texts):
        cost = estimate_tokens(text) + HIT_OVERHEAD_TOKENS
        if used + cost <= budget:
            kept.append(i)
            used += cost
    return kept


def score_question(ranked: list[set[str]], texts: list[str], gold: set[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in KS:
        found = set().union(*ranked[:k]) & gold if ranked[:k] else set()
        out[f"r@{k}"] = len(found) / len(gold)
    for budget in BUDGETS:
        kept = pack(texts, budget)
        found = set().union(*(ranked[i] for i in kept)) & gold if kept else set()
        out[f"r@{budget}tok"] = len(found) / len(gold)
    rel = [1.0 if ids & gold else 0.0 for ids in ranked[:10]]
    dcg = sum(r / math.log2(i + 2) for i, r in enumerate(rel))
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    out["ndcg@10"] = dcg / ideal if ideal else 0.0
    first = next((i for i, ids in enumerate(ranked) if ids & gold), None)
    out["mrr"] = 0.0 if first is None else 1.0 / (first + 1)
    return out


def chunk_dia_ids(mem: mindfile.Mindfile) -> dict[str, set[str]]:
    """Each chunk's evidence ids (from its metadata), to score what a context holds."""
    out: dict[str, set[str]] = {}
    for chunk_id, meta in mem.db.query("SELECT chunk_id, metadata_json FROM chunks"):
        m = json.loads(meta)
        out[str(chunk_id)] = set(m.get("dia_ids") or [m.get("dia_id", "")])
    return out


def score_context(
    mem: mindfile.Mindfile,
    question: str,
    gold: set[str],
    by_chunk: dict[str, set[str]],
    as_of: datetime | None = None,
) -> dict[str, float]:
    """Evidence inside ``build_context`` at each budget (``ctx@``), and how many memories
    it holds (``mem@``), for a question asked in a new session of the conversation's user."""
    out: dict[str, float] = {}
    for budget in CONTEXT_BUDGETS:
        ctx = mem.build_context(
            "locomo-question",
            question,
            token_budget=budget,
            user_id=USER,
            config=CONTEXT_CONFIG,
            **({} if as_of is None else {"as_of": as_of}),
        )
        found: set[str] = set()
        memories = 0
        for item in ctx.items:
            if item.source in ("memory", "salient") and item.chunk_id:
                found |= by_chunk.get(item.chunk_id, set())
                memories += 1
        out[f"ctx@{budget}"] = len(found & gold) / len(gold)
        out[f"mem@{budget}"] = float(memories)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    data = json.loads(Path(args.data).read_text())
    if args.limit:
        data = data[: args.limit]
    if args.conversations:
        lo, _, hi = args.conversations.partition("-")
        data = data[int(lo) : int(hi or lo) + 1]
    modes = [m.strip() for m in args.modes.split(",")]
    scores: dict[str, list[tuple[int, dict[str, float]]]] = defaultdict(list)
    timings: dict[str, list[float]] = defaultdict(list)
    ingest_s = 0.0
    turns = 0
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        server = stack.enter_context(postgres(args.pg_url)) if args.postgres else None
        for i, conv in enumerate(data):
            path = server.fresh_url() if server is not None else str(Path(tmp) / f"conv{i}.db")
            with mindfile.open(
                path,
                embedder=args.embedder,
                vector_index=args.index,
                neighbor_context=not args.no_neighbor_context,
            ) as mem:
                t0 = time.perf_counter()
                turns += load_conversation(
                    mem,
                    conv,
                    date_in_text=not args.no_date,
                    long=args.long,
                    occurred_at=args.occurred_at,
                    no_authors=args.no_authors,
                )
                ingest_s += time.perf_counter() - t0
                if args.publish:
                    # Search through a published base (an ANN graph, the exact index's
                    # mapped generation) instead of the in-memory delta that holds a
                    # conversation this small.
                    mem.index.merge(full=True)  # type: ignore[attr-defined]
                by_chunk = chunk_dia_ids(mem) if "context" in modes else {}
                as_of = last_session_time(conv) if args.as_of == "last-session" else None
                time_kw: dict[str, Any] = {} if as_of is None else {"as_of": as_of}
                if args.no_temporal:
                    time_kw["temporal"] = False
                if args.no_preferences:
                    time_kw["preferences"] = False
                if args.no_neighbors:
                    time_kw["neighbors"] = False
                if args.no_feedback:
                    time_kw["feedback"] = False
                if args.per_session:
                    time_kw["per_session"] = args.per_session
                for qa in conv["qa"]:
                    gold = evidence_ids(qa)
                    if not gold:
                        continue
                    for mode in modes:
                        if mode == "context":
                            t0 = time.perf_counter()
                            row = score_context(mem, qa["question"], gold, by_chunk, as_of)
                            timings[mode].append((time.perf_counter() - t0) / len(CONTEXT_BUDGETS))
                            scores[mode].append((int(qa["category"]), row))
                            continue
                        kw = _mode_kwargs(mode, args)
                        if args.candidates is not None:
                            kw["candidates"] = args.candidates
                        t0 = time.perf_counter()
                        hits = mem.search(qa["question"], top_k=max(KS), **kw, **time_kw)
                        timings[mode].append(time.perf_counter() - t0)
                        ranked = [
                            set(h.metadata.get("dia_ids") or [h.metadata.get("dia_id", "")])
                            for h in hits
                        ]
                        texts = [h.text for h in hits]
                        row = score_question(ranked, texts, gold)
                        scores[mode].append((int(qa["category"]), row))
    return summarize(scores, timings, turns, ingest_s, args)


def _mode_kwargs(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    if mode == "vector":
        return {"mode": "vector"}
    if mode == "fts":
        return {"mode": "fts"}
    weights = {"vector_weight": args.vector_weight, "fts_weight": args.fts_weight}
    if mode == "hybrid":  # the API's defaults unless --vector-weight/--fts-weight
        return {"mode": "hybrid", **weights}
    if mode == "hybrid-seed":  # the seed's weights, whatever the embedder recommends
        return {"mode": "hybrid", "vector_weight": 0.7, "fts_weight": 0.3}
    if mode == "hybrid-rrf":
        return {"mode": "hybrid", "fusion": "rrf", **weights}
    raise SystemExit(f"unknown mode {mode!r}")


def _mean(rows: list[dict[str, float]], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows) if rows else float("nan")


def summarize(
    scores: dict[str, list[tuple[int, dict[str, float]]]],
    timings: dict[str, list[float]],
    turns: int,
    ingest_s: float,
    args: argparse.Namespace,
) -> dict[str, Any]:
    import numpy as np

    result: dict[str, Any] = {"modes": {}, "turns": turns, "ingest_s": ingest_s}
    for mode, rows in scores.items():
        metrics = CONTEXT_METRICS if mode == "context" else METRICS
        entry: dict[str, Any] = {}
        groups = {
            "overall": [r for _, r in rows],
            "overall excl. adversarial": [r for c, r in rows if c != 5],
        }
        for cat, name in CATEGORIES.items():
            groups[f"{cat} {name}"] = [r for c, r in rows if c == cat]
        for group, grows in groups.items():
            entry[group] = {m: _mean(grows, m) for m in metrics} | {"n": len(grows)}
        entry["search_ms_p50"] = float(np.median(timings[mode]) * 1000)
        result["modes"][mode] = entry
    result["config"] = {
        "embedder": args.embedder or "default",
        "index": args.index,
        "published": args.publish,
        "vector_weight": args.vector_weight,
        "fts_weight": args.fts_weight,
        "date_in_text": not args.no_date,
        "neighbor_context": not args.no_neighbor_context,
        "occurred_at": args.occurred_at,
        "as_of": args.as_of,
        "temporal": not args.no_temporal,
        "preferences": not args.no_preferences,
        "neighbors": not args.no_neighbors,
        "token_match": args.token_match_config or not args.no_token_match,
        "feedback": args.feedback_config or not args.no_feedback,
        "authors": None if args.no_authors else args.author_weight,
        "per_session": args.per_session,
        "conversations": args.conversations or "all",
        "context_config": json.loads(args.context_config) if args.context_config else None,
    }
    return result


def print_report(result: dict[str, Any]) -> None:
    rows = []
    context = result["modes"].pop("context", None)
    for mode, entry in result["modes"].items():
        for group in ("overall", "overall excl. adversarial"):
            row = {"mode": mode, "questions": group, "n": entry[group]["n"]}
            row |= {m: round(entry[group][m], 3) for m in METRICS}
            rows.append(row | {"p50 ms": round(entry["search_ms_p50"], 2)})
    for name, anchor in ANCHORS.items():
        rows.append({"mode": name, "questions": "overall"} | anchor)
    print_table(rows, ["mode", "questions", "n", *METRICS, "p50 ms"], "LoCoMo retrieval")
    cat_rows = []
    for mode, entry in result["modes"].items():
        for cat, name in CATEGORIES.items():
            g = entry[f"{cat} {name}"]
            row = {"mode": mode, "category": f"{cat} {name}", "n": g["n"]}
            cat_rows.append(row | {m: round(g[m], 3) for m in METRICS})
    print_table(cat_rows, ["mode", "category", "n", *METRICS], "Per category")
    if context is not None:
        result["modes"]["context"] = context
        ctx_rows = []
        for group in [
            "overall",
            "overall excl. adversarial",
            *(f"{c} {n}" for c, n in CATEGORIES.items()),
        ]:
            g = context[group]
            ctx_rows.append(
                {"questions": group, "n": g["n"]} | {m: round(g[m], 3) for m in CONTEXT_METRICS}
            )
        print_table(
            ctx_rows,
            ["questions", "n", *CONTEXT_METRICS],
            f"Evidence inside build_context (ctx@budget; mem@budget: memories in it; "
            f"{context['search_ms_p50']:.1f} ms p50 per context)",
        )
    print(
        f"\nturns stored: {result['turns']}  ingest: {result['ingest_s']:.2f} s  "
        f"config: {result['config']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="path to locomo10.json")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument(
        "--modes",
        default="vector,fts,hybrid,hybrid-seed,hybrid-rrf,context",
        help="comma-separated: vector, fts, hybrid (the API's default weights, or "
        "--vector-weight/--fts-weight), hybrid-seed (0.7/0.3), hybrid-rrf, context "
        "(evidence inside build_context at 1k/2k/4k tokens)",
    )
    parser.add_argument("--embedder", default=None, help="embedder spec (default: bundled)")
    parser.add_argument("--index", default="exact")
    parser.add_argument(
        "--publish",
        action="store_true",
        help="publish each store's vector index before searching (exact, zvec, lancedb)",
    )
    parser.add_argument("--vector-weight", type=float, default=None)
    parser.add_argument("--fts-weight", type=float, default=None)
    parser.add_argument("--no-date", action="store_true", help="don't prefix turns with dates")
    parser.add_argument(
        "--no-neighbor-context",
        action="store_true",
        help="open stores with neighbor_context=False (no BM25 context columns)",
    )
    parser.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    parser.add_argument(
        "--long",
        type=int,
        default=0,
        help="merge turns into messages of at least N chars (e.g. 1000: realistic chat)",
    )
    parser.add_argument(
        "--conversations", default="", help="a range of conversations, e.g. 0-4 (for CV)"
    )
    parser.add_argument(
        "--candidates", type=int, default=None, help="search(candidates=...) (default: API's)"
    )
    parser.add_argument(
        "--context-config", default="", help='ContextConfig fields as JSON, e.g. {"hybrid": false}'
    )
    parser.add_argument(
        "--occurred-at",
        action="store_true",
        help="store each turn with occurred_at = its session's date",
    )
    parser.add_argument(
        "--as-of",
        choices=("now", "last-session"),
        default="now",
        help="the query date: the wall clock, or the conversation's last session date",
    )
    parser.add_argument("--no-temporal", action="store_true", help="search(temporal=False)")
    parser.add_argument("--no-preferences", action="store_true", help="search(preferences=False)")
    parser.add_argument(
        "--no-neighbors",
        action="store_true",
        help="search(neighbors=False) and no neighbour smoothing in build_context",
    )
    parser.add_argument(
        "--neighbor-config",
        default=None,
        help='NeighborConfig fields as JSON, e.g. {"weight": 0.3}',
    )
    parser.add_argument(
        "--no-token-match",
        action="store_true",
        help="search(token_match=False) and no token match in build_context",
    )
    parser.add_argument(
        "--token-match-config",
        default=None,
        help='TokenMatchConfig fields as JSON, e.g. {"weight": 0.3}',
    )
    parser.add_argument("--no-feedback", action="store_true", help="search(feedback=False)")
    parser.add_argument(
        "--feedback-config",
        default=None,
        help='constants of mindfile.retrieve.feedback as JSON, e.g. {"WEIGHT": 0.5}',
    )
    parser.add_argument("--per-session", type=int, default=None, help="search(per_session=N)")
    parser.add_argument(
        "--no-authors",
        action="store_true",
        help="store turns without metadata['author'] (no author match)",
    )
    parser.add_argument(
        "--author-weight",
        type=float,
        default=None,
        help="mindfile.retrieve.authors.WEIGHT (the author-match lift)",
    )
    parser.add_argument(
        "--preference-config",
        default="",
        help='PreferenceConfig fields as JSON, e.g. {"limit": 20}',
    )
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="stores on Postgres (a schema each): --pg-url's server, else an embedded one",
    )
    parser.add_argument("--pg-url", default=None, help="the Postgres server for --postgres")
    parser.add_argument(
        "--time-config", default="", help='TimeConfig fields as JSON, e.g. {"weight": 0.2}'
    )
    args = parser.parse_args()
    if args.time_config:
        from mindfile.retrieve import temporal

        temporal.DEFAULT_TIME_CONFIG = temporal.TimeConfig(**json.loads(args.time_config))
    if args.neighbor_config or args.no_neighbors:
        from mindfile.retrieve import neighbors

        fields = json.loads(args.neighbor_config or "{}")
        if args.no_neighbors:
            fields["weight"] = 0.0  # build_context too
        neighbors.DEFAULT_NEIGHBOR_CONFIG = neighbors.NeighborConfig(**fields)
    if args.token_match_config or args.no_token_match:
        from mindfile.retrieve import token_match

        fields = json.loads(args.token_match_config or "{}")
        if args.no_token_match:
            fields["weight"] = 0.0  # build_context too
        token_match.DEFAULT_TOKEN_MATCH_CONFIG = token_match.TokenMatchConfig(**fields)
    if args.feedback_config:
        from mindfile.retrieve import feedback

        for name, value in json.loads(args.feedback_config).items():
            if name not in ("DOCS", "TERMS", "WEIGHT", "SHARPNESS"):
                raise SystemExit(f"--feedback-config: unknown constant {name!r}")
            setattr(feedback, name, value)
    if args.author_weight is not None:
        from mindfile.retrieve import authors

        authors.WEIGHT = args.author_weight
    if args.preference_config:
        from mindfile.retrieve import preferences

        preferences.DEFAULT_PREFERENCE_CONFIG = preferences.PreferenceConfig(
            **json.loads(args.preference_config)
        )
    if args.context_config:
        global CONTEXT_CONFIG
        CONTEXT_CONFIG = mindfile.ContextConfig(**json.loads(args.context_config))
    if not Path(args.data).exists():
        raise SystemExit(f"LoCoMo data not found at {args.data} (pass --data)")
    result = run(args)
    result["machine"] = machine_info()
    if args.json:
        emit_json(result)
    else:
        print_report(result)


if __name__ == "__main__":
    main()
