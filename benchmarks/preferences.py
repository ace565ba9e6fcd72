"""Preference recall (issue 14): are a user's stated preferences found for recommendation
questions that do not repeat their words?

Each item of ``benchmarks/data/preferences.json`` (our own text) is one or two user turns
stating a preference, habit, possession or constraint indirectly ("ugh, fighting Premiere
Pro's timeline again") and a later question asking for a recommendation ("Can you
recommend a video editing course?"). Each item gets its own store: a LoCoMo conversation
as the distractor history (read in place from ``../shared/data/locomo/locomo10.json``,
never copied here; its first speaker is the ``user``, the second the ``assistant``, text
only), with the item's turns inserted as consecutive user turns at a random place of a
random session (seeded per item). Everything goes through the real engine
(``mindfile.open``, bundled static model); the question is a new search over the whole
store (``top_k=50``) and recall@k is the share of the item's turns in the top k.

Items are split into halves by index parity (A = even, B = odd). Every configuration is
run on both halves; ``cv`` picks the best one on one half (by r@10, then r@50) and
reports it on the other.

    python benchmarks/preferences.py [--json] [--configs '[{"weight": 0.3}, ...]'] [--context]

``--context`` also counts the item's turns among the memories of a ``build_context`` for
the question (a new session of the user) at 1,000 / 2,000 / 4,000 tokens: ``ctx@B``, with
``ContextConfig(preferences=False)`` for ``"off"``.

A configuration is ``"off"`` (``search(preferences=False)``) or
:class:`mindfile.retrieve.preferences.PreferenceConfig` fields.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import LOCOMO, emit_json, machine_info, print_table

import mindfile
from mindfile.retrieve import preferences as prefs

ITEMS = Path(__file__).resolve().parent / "data" / "preferences.json"
KS = (5, 10, 50)
USER = "prefs-user"
#: The grid of benchmarks/README.md ("Preference recall"): off, each part alone, the
#: boost's weight, the candidates scanned without a third leg, the third leg's depth.
DEFAULT_CONFIGS: list[Any] = [
    "off",
    {"weight": 0.0, "leg": 0},
    {"strip_bm25": False, "strip_vector": False, "leg": 0},
    {"leg": 0, "scan": 100},
    {"leg": 0, "scan": 200},
    {"leg": 20},
    {"leg": 50},
    {"leg": 150},
    {"weight": 0.3, "leg": 50},
    {"weight": 0.5, "leg": 50},
    {"weight": 2.0, "leg": 50},
    {"leg": 50, "expand": 10},
]


def haystack(conv: dict[str, Any]) -> list[list[dict[str, str]]]:
    """A LoCoMo conversation as chat sessions: speaker A is the user, B the assistant."""
    c = conv["conversation"]
    user = c.get("speaker_a")
    sessions = []
    n = 1
    while f"session_{n}" in c:
        turns = []
        for turn in c[f"session_{n}"]:
            text = turn.get("text", "")
            if turn.get("blip_caption"):
                text += f" [image: {turn['blip_caption']}]"
            role = "user" if turn["speaker"] == user else "assistant"
            turns.append({"role": role, "content": text})
        sessions.append(turns)
        n += 1
    return sessions


def plant(
    sessions: list[list[dict[str, str]]], item: dict[str, Any], rng: random.Random
) -> list[tuple[str, int, Any, dict[str, Any]]]:
    """Events of the conversation with the item's turns inserted as user turns."""
    where = rng.randrange(len(sessions))
    at = rng.randrange(len(sessions[where]) + 1)
    events = []
    for s, turns in enumerate(sessions):
        msgs: list[tuple[dict[str, str], dict[str, Any]]] = [(t, {}) for t in turns]
        if s == where:
            planted = [
                ({"role": "user", "content": t}, {"planted": item["id"]}) for t in item["turns"]
            ]
            msgs[at:at] = planted
        for seq, (payload, meta) in enumerate(msgs, start=1):
            events.append((f"session_{s + 1}", seq, payload, meta))
    return events


class Experiments:
    """A mechanism measured here but not in the library: ``expand`` (the BM25 leg also
    gets the static model's nearest vocabulary words of the question's topic). Patched
    in for one search at a time."""

    def __init__(self, mem: mindfile.Mindfile) -> None:
        self.mem = mem
        self._vocab: tuple[Any, list[str]] | None = None

    def vocab(self) -> tuple[Any, list[str]]:
        if self._vocab is None:
            import numpy as np

            emb: Any = self.mem.embedder
            matrix = emb._ready().matrix
            tok = json.loads((Path(emb._path) / "tokenizer.json").read_text())["model"]["vocab"]
            words = [""] * len(tok)
            for w, i in tok.items():
                words[i] = w
            norms = np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
            self._vocab = (matrix / norms, words)
        return self._vocab

    def expand(self, query: str, n: int) -> str:
        import numpy as np

        from mindfile.retrieve.fts import query_words

        topic = prefs.topic_query(query)
        matrix, words = self.vocab()
        sims = matrix @ self.mem.embedder.embed_query(topic)
        have = {w.lower() for w in query_words(topic)}
        extra: list[str] = []
        for i in np.argsort(-sims)[:200]:
            w = words[int(i)]
            if w.isalpha() and len(w) >= 3 and w not in have and w not in STOP:
                extra.append(w)
                if len(extra) == n:
                    break
        return f"{topic} {' '.join(extra)}"

    def patch(self, cfg: dict[str, Any], question: str) -> Any:
        import contextlib

        from mindfile.retrieve import search as search_mod

        stack = contextlib.ExitStack()
        expand = cfg.get("expand", 0)
        if expand:
            original_query = search_mod.leg_query

            def leg_query(q: str, which: Any) -> str:
                return self.expand(q, expand) if which == "bm25" else original_query(q, which)

            stack.enter_context(_patched(search_mod, "leg_query", leg_query))
        return stack


STOP = frozenset(
    str.split(
        "the and for with that this you your are was were have has had not but all any "
        "can should would could will what when where which who how why about from into "
        "over than then them they their there these those its our out off too very just "
        "also never always some more most much many such only own same other "
    )
)


def _patched(module: Any, name: str, value: Any) -> Any:
    import contextlib

    @contextlib.contextmanager
    def cm() -> Any:
        old = getattr(module, name)
        setattr(module, name, value)
        try:
            yield
        finally:
            setattr(module, name, old)

    return cm()


def shared_words(item: dict[str, Any]) -> set[str]:
    """Content words (BM25's query words, a trailing "s" dropped) that the question
    repeats from the item's turns: should be none."""
    from mindfile.retrieve.fts import query_words

    def words(text: str) -> set[str]:
        return {w.lower().rstrip("s") for w in query_words(text)}

    return words(item["question"]) & set().union(*(words(t) for t in item["turns"]))


def config_name(cfg: Any) -> str:
    return "off" if cfg == "off" else json.dumps(cfg, sort_keys=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    items = json.loads(Path(args.items).read_text())["items"]
    if args.limit:
        items = items[: args.limit]
    data = json.loads(Path(args.data).read_text())
    configs = json.loads(args.configs) if args.configs else DEFAULT_CONFIGS
    scores: dict[str, list[tuple[int, dict[str, float]]]] = defaultdict(list)
    timings: dict[str, list[float]] = defaultdict(list)
    detected = 0
    intent = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, item in enumerate(items):
            rng = random.Random(f"{args.seed}:{item['id']}")
            sessions = [
                s for c in rng.sample(range(len(data)), args.haystack) for s in haystack(data[c])
            ]
            events = plant(sessions, item, rng)
            detected += any(prefs.statement_kind(t) for t in item["turns"])
            intent += prefs.recommendation_intent(item["question"])
            with mindfile.open(Path(tmp) / f"item{i}.db") as mem:
                mem.store_many(events, user_id=USER)
                prefs.backfill(mem.db)  # as the backfill leaves a store (written unclassified)
                # Built now: until the BM25 index is ready (a background build), searches
                # rank with FTS5, by a number of questions that varies from run to run.
                if mem.lexical is not None:
                    mem.lexical.size()
                planted = {
                    str(cid)
                    for cid, meta in mem.db.query("SELECT chunk_id, metadata_json FROM chunks")
                    if json.loads(meta).get("planted") == item["id"]
                }
                experiments = (
                    Experiments(mem)
                    if any(isinstance(c, dict) and "expand" in c for c in configs)
                    else None
                )
                for cfg in configs:
                    name = config_name(cfg)
                    kw: dict[str, Any] = {"preferences": cfg != "off"}
                    extra = None
                    if cfg != "off":
                        fields = {k: v for k, v in cfg.items() if k != "expand"}
                        prefs.DEFAULT_PREFERENCE_CONFIG = prefs.PreferenceConfig(**fields)
                        if experiments is not None and len(fields) < len(cfg):
                            extra = experiments.patch(cfg, item["question"])
                    t0 = time.perf_counter()
                    if extra is not None:
                        with extra:
                            hits = mem.search(item["question"], top_k=max(KS), **kw)
                    else:
                        hits = mem.search(item["question"], top_k=max(KS), **kw)
                    timings[name].append(time.perf_counter() - t0)
                    ids = [h.chunk_id for h in hits]
                    row = {f"r@{k}": len(planted & set(ids[:k])) / len(planted) for k in KS}
                    if args.context:
                        row |= context_recall(mem, item["question"], planted, cfg != "off")
                    scores[name].append((i, row))
    result: dict[str, Any] = {
        "items": len(items),
        "questions repeating a content word": sum(1 for it in items if shared_words(it)),
        "detected": detected,
        "intent": intent,
        "configs": {},
    }
    for name, rows in scores.items():
        entry: dict[str, Any] = {}
        for half, parity in (("A", 0), ("B", 1), ("all", None)):
            sel = [r for i, r in rows if parity is None or i % 2 == parity]
            entry[half] = {m: sum(r[m] for r in sel) / len(sel) for m in sel[0]} | {"n": len(sel)}
        entry["p50_ms"] = 1000 * sorted(timings[name])[len(timings[name]) // 2]
        result["configs"][name] = entry
    result["cv"] = cross_validate(result["configs"])
    return result


#: Token budgets of ``--context``.
CONTEXT_BUDGETS = (1000, 2000, 4000)


def context_recall(
    mem: mindfile.Mindfile, question: str, planted: set[str], on: bool
) -> dict[str, float]:
    """``ctx@B``: the share of the item's turns among the memories of a ``build_context``
    for the question, asked in a new session of the user, at each budget ``B``."""
    out = {}
    config = mindfile.ContextConfig(preferences=on)
    for budget in CONTEXT_BUDGETS:
        ctx = mem.build_context(
            "question", question, token_budget=budget, user_id=USER, config=config
        )
        held = {i.chunk_id for i in ctx.items if i.source in ("memory", "salient")}
        out[f"ctx@{budget}"] = len(planted & held) / len(planted)
    return out


def latency(args: argparse.Namespace) -> dict[str, Any]:
    """Search latency with the mechanism on and off, interleaved, on one store of
    ``--latency`` LoCoMo turns or more (every conversation, repeated under new session
    names until there are enough): LoCoMo questions (no recommendation intent) and the
    items' questions (intent)."""
    import numpy as np

    items = json.loads(Path(args.items).read_text())["items"]
    data = json.loads(Path(args.data).read_text())
    plain = [qa["question"] for conv in data for qa in conv["qa"]][:400]
    asks = [item["question"] for item in items]
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, mindfile.open(Path(tmp) / "lat.db") as mem:
        stored, copy = 0, 0
        while stored < args.latency:
            for c, conv in enumerate(data):
                events = [
                    (f"c{copy}-{c}-s{s}", seq, turn)
                    for s, turns in enumerate(haystack(conv))
                    for seq, turn in enumerate(turns, start=1)
                ]
                mem.store_many(events, user_id=USER)
                stored += len(events)
            copy += 1
        mem.rebuild_index()
        out["chunks"] = stored
        # Chunks are written unclassified; the backfill classifies them once per store.
        t0 = time.perf_counter()
        prefs.backfill(mem.db, pause=0.0)
        out["backfill_ms"] = (time.perf_counter() - t0) * 1000
        # The statement set's first read in this process (an indexed read of
        # chunks.user_statement since migration 0014; before it, a pass of the detector
        # over every chunk in every process).
        t0 = time.perf_counter()
        out["statements"] = len(prefs.store_marks(mem.db))
        out["first_pass_ms"] = (time.perf_counter() - t0) * 1000
        for name, queries in (("no intent", plain), ("intent", asks)):
            for q in queries[:20]:  # warm caches and the BM25 index
                mem.search(q, top_k=10)
            times: dict[bool, list[float]] = {True: [], False: []}
            for q in queries:
                for on in (False, True):
                    t0 = time.perf_counter()
                    mem.search(q, top_k=10, preferences=on)
                    times[on].append(time.perf_counter() - t0)
            for on in (False, True):
                ms = np.array(times[on]) * 1000
                out[f"{name}, {'on' if on else 'off'}"] = {
                    "n": len(ms),
                    "p50_ms": float(np.percentile(ms, 50)),
                    "p95_ms": float(np.percentile(ms, 95)),
                }
    return out


def cross_validate(configs: dict[str, Any]) -> list[dict[str, Any]]:
    """Best configuration on one half (by r@10, then r@50; among the library's
    configurations: not off, not the benchmark-only ``expand``), reported on the other."""
    out = []
    for tune, test in (("A", "B"), ("B", "A")):
        cands = [n for n in configs if n != "off" and '"expand"' not in n]
        if not cands:
            continue
        best = max(cands, key=lambda n: (configs[n][tune]["r@10"], configs[n][tune]["r@50"]))
        row = {"tuned on": tune, "tested on": test, "chosen": best}
        for m in ("r@5", "r@10", "r@50"):
            row[f"off {m}"] = round(configs["off"][test][m], 3) if "off" in configs else None
            row[f"on {m}"] = round(configs[best][test][m], 3)
        out.append(row)
    return out


def print_report(result: dict[str, Any]) -> None:
    rows = []
    for name, entry in result["configs"].items():
        row: dict[str, Any] = {"config": name}
        for half in ("A", "B", "all"):
            for m in ("r@5", "r@10", "r@50"):
                row[f"{half} {m}"] = round(entry[half][m], 3)
        rows.append(row | {"p50 ms": round(entry["p50_ms"], 2)})
    cols = ["config"] + [f"{h} {m}" for h in ("A", "B", "all") for m in ("r@5", "r@10", "r@50")]
    print_table(rows, [*cols, "p50 ms"], "Preference recall (planted turns in the top k)")
    ctx_keys = [f"ctx@{b}" for b in CONTEXT_BUDGETS]
    if any(k in entry["all"] for entry in result["configs"].values() for k in ctx_keys):
        rows = [
            {"config": name}
            | {f"{h} {k}": round(entry[h][k], 3) for h in ("A", "B", "all") for k in ctx_keys}
            for name, entry in result["configs"].items()
        ]
        print_table(rows, list(rows[0]), "Inside build_context (planted turns among memories)")
    cv = result["cv"]
    if cv:
        print_table(cv, list(cv[0]), "Cross-validation (chosen on one half, reported on the other)")
    print(
        f"\nitems: {result['items']}  turns detected as statements: {result['detected']}  "
        f"questions with intent: {result['intent']}  questions repeating a content word of "
        f"their turns: {result['questions repeating a content word']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(LOCOMO), help="path to locomo10.json (haystack)")
    parser.add_argument("--items", default=str(ITEMS), help="the evaluation items")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--configs", default="", help='JSON list: "off" or PreferenceConfig fields')
    parser.add_argument("--seed", default="0", help="placement seed")
    parser.add_argument("--limit", type=int, default=0, help="only the first N items")
    parser.add_argument(
        "--context",
        action="store_true",
        help="also the items' turns inside build_context at 1k/2k/4k tokens (ctx@)",
    )
    parser.add_argument(
        "--haystack", type=int, default=1, help="LoCoMo conversations per item's store"
    )
    parser.add_argument(
        "--latency",
        type=int,
        default=0,
        help="instead: time searches (on/off) on a store of at least N LoCoMo turns",
    )
    args = parser.parse_args()
    if not Path(args.data).exists():
        raise SystemExit(f"LoCoMo data not found at {args.data} (pass --data)")
    if args.latency:
        lat = latency(args)
        if args.json:
            emit_json(lat | {"machine": machine_info()})
        else:
            rows = [{"queries": k} | v for k, v in lat.items() if isinstance(v, dict)]
            print_table(rows, ["queries", "n", "p50_ms", "p95_ms"], f"{lat['chunks']} chunks")
            print(
                f"\nbackfill (once per store): {lat['backfill_ms']:.0f} ms; first read of the "
                f"statement set: {lat['first_pass_ms']:.0f} ms ({lat['statements']} statements)"
            )
        return
    result = run(args)
    result["machine"] = machine_info()
    if args.json:
        emit_json(result)
    else:
        print_report(result)


if __name__ == "__main__":
    main()
