#!/usr/bin/env bash
# The facade crate with no default features and with each backend feature alone, and the agent
# crate with each of its model clients alone (`openai`: chat completions and the Responses
# API; `anthropic`: the Messages API): each must compile without warnings and pass its own
# tests in every combination a user can pick.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stategraph/target}"

for features in "" sqlite postgres mysql redis mongodb agent mcp client; do
    args=(-p stategraph --no-default-features)
    [ -n "$features" ] && args+=(--features "$features")
    echo "== stategraph --no-default-features ${features:+--features $features}"
    cargo clippy "${args[@]}" --lib --quiet -- -D warnings
    cargo test "${args[@]}" --lib --quiet
done

for features in "" openai anthropic; do
    args=(-p stategraph-agent --no-default-features)
    [ -n "$features" ] && args+=(--features "$features")
    echo "== stategraph-agent --no-default-features ${features:+--features $features}"
    cargo clippy "${args[@]}" --lib --quiet -- -D warnings
    cargo test "${args[@]}" --lib --quiet
done
