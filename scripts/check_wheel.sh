#!/usr/bin/env bash
# Build the sdist and wheel, check them, install the wheel into a fresh virtual
# environment outside the source tree and run the demo and a smoke test there, so a file
# missing from the package fails here instead of in a user's install.
# Needs `build` and `twine` (the dev extra). Usage: bash scripts/check_wheel.sh
set -euo pipefail
cd "$(dirname "$0")/.."

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
python -m build --sdist --wheel --outdir "$out/dist" . >"$out/build.log" 2>&1 || {
    cat "$out/build.log"
    exit 1
}
python -m twine check --strict "$out"/dist/*
wheel="$(ls "$out"/dist/*.whl)"
python - "$wheel" <<'PY'
import sys
import zipfile

names = zipfile.ZipFile(sys.argv[1]).namelist()
need = [
    "mindfile/py.typed",
    "mindfile/storage/migrations/0001_core.sql",
    "mindfile/storage/postgres/migrations/0001_core.sql",
    "mindfile/embed/models/minilm-l6-static-256/model.safetensors",
    "mindfile/embed/models/minilm-l6-static-256/tokenizer.json",
    "mindfile/embed/models/minilm-l6-static-256/neighbours-ids.npy",
    "mindfile/embed/models/minilm-l6-static-256/neighbours-sims.npy",
    "mindfile/embed/models/minilm-l6-static-256/neighbours.json",
    "mindfile/data/sample_conversation.json",
]
missing = [n for n in need if n not in names]
stray = [n for n in names if n.startswith(("tests/", "benchmarks/", "scripts/"))]
assert not missing, f"wheel lacks {missing}"
assert not stray, f"wheel carries {stray[:5]}"
print(f"wheel ok: {len(names)} files")
PY
ls -l "$out"/dist/ | awk 'NR > 1 { printf "%s  %.1f MiB\n", $NF, $5 / 1048576 }'

# A fresh environment in a folder that is not the checkout, so `import mindfile` cannot
# pick up src/ by accident.
cd "$out"
python -m venv venv
venv/bin/python -m pip install -q "$wheel"
venv/bin/mindfile --version
venv/bin/mindfile demo --db "$out/demo.db"
venv/bin/python - <<'PY'
import importlib.metadata as md
import pathlib

import mindfile

assert "site-packages" in mindfile.__file__, mindfile.__file__
assert mindfile.__version__ == md.version("mindfile"), (mindfile.__version__, md.version("mindfile"))
with mindfile.open(pathlib.Path("smoke.db")) as mem:
    mem.store("s", 1, {"role": "user", "content": "I keep my passport in the blue drawer."})
    mem.store("s", 2, {"role": "user", "content": "The cat is called Miso."})
    hits = mem.search("where is my passport?", top_k=1)
    assert hits[0].text.startswith("I keep my passport"), hits[0].text
    assert mem.info().schema_version >= 7
print("smoke ok:", mindfile.__version__, mindfile.__file__)
PY
