#!/usr/bin/env bash
# Installs (once) what the HTTP API's property-based fuzzing test needs, outside the clone:
# schemathesis and openapi-spec-validator (pinned) in a venv of its own, and beside it the
# reference Agent Server's OpenAPI document (`openapi.json` from the langgraph-api wheel,
# pinned), which the test runs against `stategraph serve`. A stamp holds the pins; a second
# run with the same pins does nothing. Prints the venv's directory as its last line.
#
# Settings: STATEGRAPH_API_FUZZ_VENV (default ~/.cache/stategraph/api-fuzz-venv).
set -euo pipefail

VENV="${STATEGRAPH_API_FUZZ_VENV:-$HOME/.cache/stategraph/api-fuzz-venv}"
REQUIREMENTS=("schemathesis==4.32.5" "openapi-spec-validator==0.9.0")
REFERENCE="langgraph-api==0.16.7"
STAMP="$VENV/.stategraph-requirements"
WANT="$(printf '%s\n' "${REQUIREMENTS[@]}" "$REFERENCE")"

if [[ -x "$VENV/bin/schemathesis" && -f "$VENV/reference-openapi.json" && -f "$STAMP" &&
  "$(cat "$STAMP")" == "$WANT" ]]; then
  echo "$VENV"
  exit 0
fi
echo "api-fuzz-env: installing ${REQUIREMENTS[*]} and the OpenAPI document of $REFERENCE into $VENV" >&2
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${REQUIREMENTS[@]}" >&2
wheels="$(mktemp -d)"
trap 'rm -rf "$wheels"' EXIT
"$VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
  --only-binary :all: "$REFERENCE" -d "$wheels" >&2
"$VENV/bin/python" - "$wheels" "$VENV/reference-openapi.json" <<'PY'
import glob, sys, zipfile
(wheel,) = glob.glob(sys.argv[1] + "/*.whl")
with zipfile.ZipFile(wheel) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("openapi.json"))
PY
printf '%s' "$WANT" > "$STAMP"
echo "$VENV"
