#!/usr/bin/env bash
# Coverage-guided fuzzing with cargo-fuzz (libFuzzer + AddressSanitizer) of everything that
# reads stored bytes (fuzz/fuzz_targets): each target runs for a bounded time, default 20 s,
# `scripts/fuzz.sh 300` for longer. Installs cargo-fuzz once. A crash fails the script and
# leaves the input under fuzz/artifacts/. The corpus is kept between runs in the cache.
#
# libFuzzer's sanitizer flags are nightly-only and this machine has only the stable
# toolchain, so RUSTC_BOOTSTRAP=1 lets stable rustc accept them (for this build only).
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET="${1:-20}"
CACHE="$HOME/.cache/stategraph"
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz" >&2
  cargo install --quiet --locked cargo-fuzz --version 0.13.2
fi
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${STATEGRAPH_FUZZ_TARGET_DIR:-$CACHE/fuzz-target}"

for target in decode checkpoint sqlite_row; do
  corpus="$CACHE/fuzz-corpus/$target"
  mkdir -p "$corpus"
  echo "fuzz: $target for ${SECONDS_PER_TARGET}s" >&2
  log="$CACHE/fuzz-$target.log"
  if ! cargo fuzz run "$target" "$corpus" fuzz/seeds -- \
    -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 >"$log" 2>&1; then
    grep -v -E "^#[0-9]+" "$log" | tail -40 >&2
    echo "fuzz: $target found a failing input (see fuzz/artifacts/$target)" >&2
    exit 1
  fi
  grep -E "^(Done|stat::peak_rss_mb)" "$log" >&2 || true
done
