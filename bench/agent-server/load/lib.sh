# Shared by the load scripts (sourced): builds or takes the stategraph binaries, starts each on
# its own SQLite file and the reference `langgraph dev` last, and stops them all on exit.
# Expects ROOT, BINARIES and LABELS (arrays; empty BINARIES builds the release binary) and a
# NAME for messages; sets NAMES, PORTS (one per server, the reference last) and WORK (a
# temporary directory removed on exit).

"$ROOT/scripts/reference-server.sh" install >&2
if [[ ${#BINARIES[@]} -eq 0 ]]; then
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stategraph/target}"
  (cd "$ROOT" && cargo build --release -q -p stategraph-cli)
  BINARIES=("$CARGO_TARGET_DIR/release/stategraph")
  LABELS=("stategraph")
fi
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ok() {
  for _ in $(seq 1 300); do
    curl -fs "http://127.0.0.1:$1/ok" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "$NAME: the server on port $1 did not answer /ok" >&2; return 1
}

# One server per build, each on its own SQLite file; the reference last.
NAMES=() PORTS=()
for i in "${!BINARIES[@]}"; do
  port="$(free_port)"
  RUST_LOG=warn "${BINARIES[$i]}" --db "sqlite:$WORK/$NAME-$i.sqlite" serve --port "$port" \
    >"$WORK/server-$i.log" 2>&1 &
  PIDS+=($!)
  wait_ok "$port"
  NAMES+=("${LABELS[$i]:-stategraph-$i}") PORTS+=("$port")
done
ref_port="$(free_port)"
ref_pid="$("$ROOT/scripts/reference-server.sh" start "$ref_port")"
PIDS+=("$ref_pid")
NAMES+=("langgraph dev") PORTS+=("$ref_port")
