#!/usr/bin/env bash
# Thread runs under load: stategraph's embedded server (`stategraph serve` on SQLite, the
# quick-start default) beside the reference `langgraph dev`, driven by wrk in one run.
#
#   bench/agent-server/load/run.sh [--duration S] [--connections N] [--rounds R]
#                                  [--stategraph BINARY] [--label NAME]...
#
# Each request is a run on a new thread, waited for (runs.lua). The reference server keeps
# threads in memory; stategraph commits each to the SQLite file with synchronous=FULL.
# Installs wrk from Debian's packages if it is missing (needs root), the reference server's
# venv (scripts/reference-server.sh install) and builds the release `stategraph` binary unless
# --stategraph names one (repeatable, each with a --label, to compare builds side by side).
# Servers are measured alternately, round by round; prints one line per measurement and the
# medians. Nothing here asserts a speed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
HERE="$ROOT/bench/agent-server/load"
DURATION=20 CONNECTIONS=16 ROUNDS=3
BINARIES=() LABELS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration) DURATION="$2"; shift 2 ;;
    --connections) CONNECTIONS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --stategraph) BINARIES+=("$2"); shift 2 ;;
    --label) LABELS+=("$2"); shift 2 ;;
    *) echo "usage: $0 [--duration S] [--connections N] [--rounds R] [--stategraph BIN --label NAME]..." >&2; exit 2 ;;
  esac
done
if ! command -v wrk >/dev/null; then
  echo "load: installing wrk (Debian package)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk >/dev/null
fi
NAME=load
# shellcheck source=lib.sh
source "$ROOT/bench/agent-server/load/lib.sh"

echo "load: $CONNECTIONS connections, ${DURATION}s per measurement, $ROUNDS rounds; $(nproc) cores"
declare -A ALL
for round in $(seq 1 "$ROUNDS"); do
  order=("${!NAMES[@]}")
  (( round % 2 == 0 )) && order=($(printf '%s\n' "${order[@]}" | tac))
  for i in "${order[@]}"; do
    prefix="$(printf '%08x' $((RANDOM * 32768 + RANDOM)))"
    line="$(STATEGRAPH_LOAD_PREFIX="$prefix" wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --timeout 10s \
      -s "$HERE/runs.lua" "http://127.0.0.1:${PORTS[$i]}" | grep '^RESULT')"
    echo "round $round ${NAMES[$i]}: ${line#RESULT }"
    ALL[$i]+="${line#RESULT }"$'\n'
  done
done
echo
echo "| server | runs/s | p50 ms | p99 ms | failed |"
echo "| --- | ---: | ---: | ---: | ---: |"
for i in "${!NAMES[@]}"; do
  printf '%s' "${ALL[$i]}" | python3 -c '
import sys, statistics
rows = [dict(kv.split("=") for kv in l.split()) for l in sys.stdin if l.strip()]
med = lambda k: statistics.median(float(r[k]) for r in rows)
bad = sum(int(r["non200"]) + int(r["errors"]) for r in rows)
print("| %s | %.0f | %.1f | %.1f | %d |" % (sys.argv[1], med("runs_per_s"), med("p50_ms"), med("p99_ms"), bad))
' "${NAMES[$i]}"
done
