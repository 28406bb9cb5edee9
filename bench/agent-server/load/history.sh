#!/usr/bin/env bash
# A long thread's history through the Agent Server: stategraph's embedded server
# (`stategraph serve` on SQLite) beside the reference `langgraph dev`, in one run.
#
#   bench/agent-server/load/history.sh [--turns N] [--requests N] [--limit N] [--item BYTES]
#                                      [--stategraph BINARY --label NAME]...
#
# Each server gets one thread of the `seed` graph run --turns times (default 200; each run
# appends an item of --item bytes (default 230) to `bar` and the nodes append theirs: four
# checkpoints a run), then answers `GET /threads/{id}/history?limit=N` --requests times
# (default 300, after 20 unmeasured) on one kept-alive connection. Prints each server's answer
# size and its latency percentiles, measured by the client from the request's first byte to the
# answer's last. Builds the release `stategraph` binary unless --stategraph names one
# (repeatable, each with a --label, to compare builds). Nothing here asserts a speed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
TURNS=200 REQUESTS=300 LIMIT=10 ITEM=230
BINARIES=() LABELS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --turns) TURNS="$2"; shift 2 ;;
    --requests) REQUESTS="$2"; shift 2 ;;
    --limit) LIMIT="$2"; shift 2 ;;
    --item) ITEM="$2"; shift 2 ;;
    --stategraph) BINARIES+=("$2"); shift 2 ;;
    --label) LABELS+=("$2"); shift 2 ;;
    *) echo "usage: $0 [--turns N] [--requests N] [--limit N] [--item BYTES] [--stategraph BIN --label NAME]..." >&2; exit 2 ;;
  esac
done
NAME=history
# shellcheck source=lib.sh
source "$ROOT/bench/agent-server/load/lib.sh"

echo "history: $TURNS turns, $REQUESTS requests of limit=$LIMIT, items of $ITEM bytes; $(nproc) cores"
for i in "${!NAMES[@]}"; do
  python3 - "${NAMES[$i]}" "${PORTS[$i]}" "$TURNS" "$REQUESTS" "$LIMIT" "$ITEM" <<'EOF'
import http.client, json, statistics, sys, time, uuid
name, port, turns, requests, limit, item = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:])
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    payload = r.read()
    if r.status != 200:
        sys.exit(f"history: {name}: {method} {path} answered {r.status}: {payload[:300]!r}")
    return payload
thread = call("POST", "/threads", {})
thread_id = json.loads(thread)["thread_id"]
for turn in range(turns):
    text = (f"turn {turn} " + "x" * item)[:item]
    call("POST", f"/threads/{thread_id}/runs/wait", {"assistant_id": "seed", "input": {"bar": [text]}})
path = f"/threads/{thread_id}/history?limit={limit}"
states = json.loads(call("GET", path))
if len(states) != min(limit, 4 * turns):
    sys.exit(f"history: {name} answered {len(states)} states, not {min(limit, 4 * turns)}")
size = 0
for _ in range(20):
    size = len(call("GET", path))
times = []
for _ in range(requests):
    t0 = time.perf_counter()
    call("GET", path)
    times.append((time.perf_counter() - t0) * 1000)
times.sort()
pct = lambda p: times[min(len(times) - 1, int(p / 100 * len(times)))]
print(f"| {name} | {len(states)} | {size / 1000:.0f} KB | {pct(50):.2f} | {pct(90):.2f} | {pct(99):.2f} | {statistics.mean(times):.2f} |")
EOF
done | { echo "| server | states | answer | p50 ms | p90 ms | p99 ms | mean ms |"; echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"; cat; }
