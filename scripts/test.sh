#!/usr/bin/env bash
# Runs the whole test suite: sets up what the tests need (idempotently; a second run skips
# everything already done), then runs every unit, integration, conformance, interop and doc
# test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

# Build outside the clone so that a fresh clone (CI) reuses the compiled dependencies.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stategraph/target}"

# Python LangGraph (pinned) for the interop tests.
STATEGRAPH_PYTHON="$(scripts/python-env.sh | tail -n 1)"
export STATEGRAPH_PYTHON

# LangGraph's JS client (pinned) for the Agent Server test with the JS SDK.
STATEGRAPH_JS_SDK_DIR="$(scripts/js-sdk.sh | tail -n 1)"
export STATEGRAPH_JS_SDK_DIR

scripts/install-pgvector.sh  # pgvector for the Postgres store (idempotent)
scripts/install-model.sh >/dev/null  # all-MiniLM-L6-v2 for stategraph-embed (idempotent)

# A MongoDB-compatible server for the MongoDB saver's tests: mongoeco (in Python, in the
# background, idempotent), unless STATEGRAPH_TEST_MONGODB_URL already names a real MongoDB.
STATEGRAPH_TEST_MONGODB_URL="${STATEGRAPH_TEST_MONGODB_URL:-$(scripts/mongo-server.sh start | tail -n 1)}"
export STATEGRAPH_TEST_MONGODB_URL

# A real OpenAI-compatible model server for the chat client's tests: llama.cpp's llama-server
# with SmolLM2-135M-Instruct (built once from PyPI packages; in the background, idempotent),
# unless STATEGRAPH_TEST_LLM_URL already names one.
STATEGRAPH_TEST_LLM_URL="${STATEGRAPH_TEST_LLM_URL:-$(scripts/llm-server.sh start | tail -n 1)}"
export STATEGRAPH_TEST_LLM_URL

# Every feature: all backends, the local embedding model, the OpenAI-compatible client, chrono.
cargo test --workspace --all-features "$@"

# The cross-thread memory example (thread 1 saves "I like pizza", thread 2 finds it by
# meaning); it exits non-zero if the search does not find it first.
cargo run --quiet -p stategraph --example memory_store --features minilm

# Coverage-guided fuzzing of everything that reads stored bytes, 20 s per target.
scripts/fuzz.sh 20
