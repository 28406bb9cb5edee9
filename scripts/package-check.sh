#!/usr/bin/env bash
# Packages every publishable crate of the workspace (each without `publish = false`) as
# `cargo publish` would, in one `cargo package` call: cargo takes them in dependency order
# and, unless --no-verify, builds each package from its tarball against the tarballs of the
# others (a local registry in its target directory). Prints one line per crate, in that order:
# name, version, files, compressed size. Fails on any error, on any warning but cargo's note
# that tests and benches are left out of a package (on purpose: see `include` in the
# workspace manifest), and on a package without README.md, LICENSE-MIT and LICENSE-APACHE.
#
#   scripts/package-check.sh              # package and verify (builds every crate)
#   scripts/package-check.sh --no-verify  # package only
#
# Idempotent: it writes under $CARGO_TARGET_DIR/package-check/ only (the tarballs are in its
# package/). No network but cargo's own (the crates.io index, for each package's lockfile).
set -euo pipefail
cd "$(dirname "$0")/.."
# The verification builds share nothing with the workspace's (another profile, each package's
# own features), so they get a target directory of their own; without debug info, which no
# one reads there.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stategraph/target}/package-check"
export CARGO_PROFILE_DEV_DEBUG=0
export CARGO_TERM_COLOR=never
# A crate verified against another of ours gets it from the local registry cargo builds, as a
# registry package: unpacked once under $CARGO_HOME/registry/src/-HASH/ (local registries have
# no host name) and built once, as registry packages of one version never change. Ours do
# change between runs, so what an earlier run unpacked and built of them is forgotten first:
# otherwise a crate would be verified against its dependencies' old sources.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/stategraph-* \
  "$CARGO_TARGET_DIR"/debug/.fingerprint/stategraph-*

# The publishable crates: `publish` is null in cargo's metadata unless it is restricted.
mapfile -t crates < <(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["publish"] is None:
        print(p["name"])')
[ "${#crates[@]}" -gt 0 ] || { echo "package-check: no publishable crate found" >&2; exit 1; }
args=()
for c in "${crates[@]}"; do args+=(-p "$c"); done

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
# --allow-dirty: a check, not a release; it must run on a work tree with uncommitted changes.
if ! cargo package --allow-dirty "${args[@]}" "$@" >"$log" 2>&1; then
  cat "$log" >&2
  echo "package-check: FAILED: cargo package (output above)" >&2
  exit 1
fi

# Warnings other than "ignoring test `x` as `tests/x.rs` is not included in the published
# package" (and the same for benches and examples).
unexpected=$(grep -E '^(warning|error)' "$log" |
  grep -vE '^warning: ignoring (test|benchmark|example|binary) `[^`]+` as `[^`]+` is not included in the published package$' || true)
if [ -n "$unexpected" ]; then
  cat "$log" >&2
  echo "package-check: FAILED: cargo package warned:" >&2
  echo "$unexpected" >&2
  exit 1
fi

# "   Packaging NAME vVERSION (PATH)" then "    Packaged N files, SIZE (SIZE compressed)".
summary=$(awk '$1 == "Packaging" { name = $2; version = substr($3, 2) }
  $1 == "Packaged" { c = $5; sub(/^\(/, "", c); print name, version, $2, $4, c }' "$log")
if [ "$(wc -l <<<"$summary")" -ne "${#crates[@]}" ]; then
  cat "$log" >&2
  echo "package-check: FAILED: ${#crates[@]} publishable crates, but cargo packaged:" >&2
  echo "$summary" >&2
  exit 1
fi

status=0
printf '%-24s %-8s %6s %10s %11s\n' crate version files size compressed
while read -r name version files size compressed; do
  crate="$CARGO_TARGET_DIR/package/$name-$version.crate"
  missing=()
  for f in README.md LICENSE-MIT LICENSE-APACHE; do
    tar -tzf "$crate" "$name-$version/$f" >/dev/null 2>&1 || missing+=("$f")
  done
  note=""
  if [ "${#missing[@]}" -gt 0 ]; then
    note="  MISSING: ${missing[*]}"
    status=1
  fi
  printf '%-24s %-8s %6s %10s %11s%s\n' "$name" "$version" "$files" "$size" "$compressed" "$note"
done <<<"$summary"
verified=$([[ " $* " == *" --no-verify "* ]] && echo "not verified" || echo "each verified")
echo "package-check: ${#crates[@]} crates packaged, $verified, in $((SECONDS - start)) s"
if [ "$status" -ne 0 ]; then
  echo "package-check: FAILED: a package lacks a file every crate must ship" >&2
fi
exit "$status"
