#!/usr/bin/env bash
# Installs LangGraph's JS client (@langchain/langgraph-sdk, pinned) for the Agent Server test
# with the JS SDK, idempotently: a second run finds the stamp and does nothing. Prints the
# directory holding node_modules (scripts run from there resolve the package).
set -euo pipefail

VERSION="1.15.0"
DIR="${STATEGRAPH_JS_SDK_DIR:-$HOME/.cache/stategraph/js-sdk}"
STAMP="$DIR/.stategraph-stamp"
WANT="@langchain/langgraph-sdk@$VERSION"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" && -d "$DIR/node_modules/@langchain/langgraph-sdk" ]]; then
  echo "$DIR"
  exit 0
fi
command -v npm >/dev/null || { echo "js-sdk: npm is not installed (Node.js 18 or newer is needed)" >&2; exit 1; }
mkdir -p "$DIR"
cd "$DIR"
[[ -f package.json ]] || printf '{"name":"stategraph-js-sdk-test","private":true,"type":"module"}\n' > package.json
echo "js-sdk: installing $WANT into $DIR" >&2
npm install --no-audit --no-fund --silent --save-exact "$WANT" >&2
echo "$WANT" > "$STAMP"
echo "$DIR"
