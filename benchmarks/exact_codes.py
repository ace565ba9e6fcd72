"""The exact index's quantised search next to its plain float32 product (a script).

Reads every vector of a store (``--store``, e.g. one left by ``scale.py --workdir``),
embeds held-out LoCoMo questions with the store's embedder, and for each size in
``--sizes`` (the first N vectors) times ``ExactIndex.search`` with the float32 product
only and with the codes, at k=10 and at k=150 (what a hybrid search asks the vector
leg for), and compares their answers: recall of the float32 top-k, identical ranked
lists, largest score difference. Also: the codes' build time and bytes per vector.

Examples::

    python benchmarks/exact_codes.py --store /tmp/scale/scale-exact.db
    python benchmarks/exact_codes.py --store big.db --sizes 1000000 --queries 200
    python benchmarks/exact_codes.py --store s.db --bits 512 --fraction 0.085
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _chat import DEFAULT_LOCOMO, ChatCorpus
from _common import emit_json, machine_info, print_table
from _procs import pct, settle

import mindfile
from mindfile.vector import exact
from mindfile.vector.exact import ExactIndex


def load_vectors(eng: mindfile.Mindfile) -> npt.NDArray[np.float32]:
    rows = eng.db.query("SELECT embedding_blob FROM chunks_vec ORDER BY chunk_rowid")
    dims = eng.embedder.dimensions
    return np.frombuffer(b"".join(r[0] for r in rows), dtype="<f4").reshape(-1, dims).copy()


def make_index(
    eng: mindfile.Mindfile, matrix: npt.NDArray[np.float32], quantize: bool
) -> tuple[ExactIndex, float]:
    """An ExactIndex holding ``matrix`` (fed directly, not read from the store, so any
    prefix of the store can be measured); returns it and the codes' build seconds."""
    dims = matrix.shape[1]
    index = ExactIndex(eng.db, dims, quantize_from=1 if quantize else 1 << 62, background=False)
    n = len(matrix)
    index._append(np.arange(1, n + 1, dtype=np.int64), matrix, np.zeros(n, dtype=np.int32))
    index._data_version = eng.db.change_token()
    index._dirty = False
    t0 = time.perf_counter()
    with index._lock:
        index._maybe_build_codes()
    return index, time.perf_counter() - t0


def measure(
    index: ExactIndex, queries: npt.NDArray[np.float32], k: int
) -> tuple[list[list[tuple[int, float]]], dict[str, Any]]:
    for q in queries[:10]:
        index.search(q, k)
    answers, lat = [], []
    for q in queries:
        t0 = time.perf_counter()
        answers.append(index.search(q, k))
        lat.append((time.perf_counter() - t0) * 1e3)
    return answers, pct(lat)


def compare(
    got: list[list[tuple[int, float]]], truth: list[list[tuple[int, float]]]
) -> dict[str, float]:
    recall = [
        len({i for i, _ in g} & {i for i, _ in t}) / max(len(t), 1)
        for g, t in zip(got, truth, strict=True)
    ]
    same = [[i for i, _ in g] == [i for i, _ in t] for g, t in zip(got, truth, strict=True)]
    diff = max(
        (
            abs(a[1] - b[1])
            for g, t in zip(got, truth, strict=True)
            for a, b in zip(g, t, strict=False)
        ),
        default=0.0,
    )
    return {
        "recall": float(np.mean(recall)),
        "worst_recall": float(np.min(recall)),
        "identical": float(np.mean(same)),
        "max_score_diff": float(diff),
    }


def hybrid_identity(store: Path, questions: list[str]) -> dict[str, Any]:
    """End to end: ``search(q)`` (hybrid, top 10) with the codes and with the float32
    product only; how often the ranked chunk lists are the same."""
    import functools

    import mindfile.vector as vector_mod

    vector_mod._INDEXES["exact-float32"] = functools.partial(ExactIndex, quantize_from=1 << 62)
    answers = {}
    for name in ("exact", "exact-float32"):
        with mindfile.open(store, vector_index=name) as eng:  # searches only
            settle(eng)
            answers[name] = [[h.chunk_id for h in eng.search(q)] for q in questions]
    same = [a == b for a, b in zip(answers["exact"], answers["exact-float32"], strict=True)]
    sets = [
        set(a) == set(b) for a, b in zip(answers["exact"], answers["exact-float32"], strict=True)
    ]
    return {"questions": len(questions), "identical_lists": sum(same), "same_sets": sum(sets)}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--store", type=Path, required=True, help="a store to read vectors from")
    p.add_argument("--sizes", default=None, help="vector counts (default: several up to all)")
    p.add_argument("--queries", type=int, default=400, help="held-out questions")
    p.add_argument("--ks", default="10,150", help="k values")
    p.add_argument("--bits", type=int, default=None, help=f"override BITS ({exact.BITS})")
    p.add_argument("--fraction", type=float, default=None, help="override SHORTLIST_FRACTION")
    p.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    p.add_argument("--hybrid", action="store_true", help="also compare search() end to end")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.bits is not None:
        exact.BITS = args.bits
    if args.fraction is not None:
        exact.SHORTLIST_FRACTION = args.fraction
    ks = [int(k) for k in args.ks.split(",")]
    rows: list[dict[str, Any]] = []
    with mindfile.open(args.store, read_only=True) as eng:
        matrix = load_vectors(eng)
        corpus = ChatCorpus(args.locomo)
        queries = np.stack([eng.embedder.embed_query(q) for q in corpus.queries(args.queries)])
        n_all = len(matrix)
        if args.sizes:
            sizes = [min(int(s), n_all) for s in args.sizes.split(",")]
        else:
            sizes = [s for s in (5_000, 10_000, 20_000, 50_000) if s < n_all] + [n_all]
        for n in sizes:
            sub = matrix[:n].copy()
            plain, _ = make_index(eng, sub, quantize=False)
            coded, build_s = make_index(eng, sub, quantize=True)
            quant = coded._quant
            assert quant is not None
            code_bytes = (
                quant.bits.itemsize * quant.bits.shape[0]
                + quant.int8.shape[1]
                + quant.scale.itemsize
                + quant.bound.itemsize
            )
            for k in ks:
                truth, t_plain = measure(plain, queries, k)
                got, t_coded = measure(coded, queries, k)
                rows.append(
                    {
                        "vectors": n,
                        "k": k,
                        "float32_p50_ms": t_plain["p50_ms"],
                        "float32_p99_ms": t_plain["p99_ms"],
                        "codes_p50_ms": t_coded["p50_ms"],
                        "codes_p99_ms": t_coded["p99_ms"],
                        **compare(got, truth),
                        "codes_build_s": build_s,
                        "code_bytes_per_vector": code_bytes,
                    }
                )
                print(rows[-1], file=sys.stderr, flush=True)
            plain.close()
            coded.close()
    hybrid = None
    if args.hybrid:
        hybrid = hybrid_identity(args.store, ChatCorpus(args.locomo).queries(args.queries))
        print(f"hybrid search, top 10, codes vs float32 only: {hybrid}")
    report = {
        "benchmark": "mindfile-exact-codes",
        "hybrid": hybrid,
        "machine": machine_info(),
        "config": {
            "store": str(args.store),
            "queries": args.queries,
            "bits": exact.BITS,
            "shortlist_fraction": exact.SHORTLIST_FRACTION,
            "shortlist_min": exact.SHORTLIST_MIN,
        },
        "rows": rows,
    }
    out = sys.stderr if args.json else sys.stdout
    print_table(
        rows,
        [
            "vectors",
            "k",
            "float32_p50_ms",
            "float32_p99_ms",
            "codes_p50_ms",
            "codes_p99_ms",
            "recall",
            "worst_recall",
            "identical",
            "max_score_diff",
            "codes_build_s",
            "code_bytes_per_vector",
        ],
        f"ExactIndex.search: float32 product vs codes ({exact.BITS} bits, shortlist "
        f"{exact.SHORTLIST_FRACTION:g} of the vectors, min {exact.SHORTLIST_MIN})",
        file=out,
    )
    if args.json:
        emit_json(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
