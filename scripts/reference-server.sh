#!/usr/bin/env bash
# Installs and runs the Python reference Agent Server (`langgraph dev`, in-memory runtime) that
# stategraph's Agent Server HTTP API is compared against. It serves the graphs in
# bench/agent-server/reference/ (graph id `seed`).
#
#   scripts/reference-server.sh install       # create/refresh the ref venv (idempotent, stamp-guarded)
#   scripts/reference-server.sh start PORT [ARGS...]  # start in the background, wait for GET /ok,
#                                                   # print PID; ARGS go to `langgraph dev`
#                                                   # (e.g. --n-jobs-per-worker 10)
#   scripts/reference-server.sh stop PID      # stop a server started by `start`
#
# The venv (default ~/.cache/stategraph/ref-venv, override with STATEGRAPH_REF_VENV) is separate
# from the interop venv. The first install resolves the pinned top-level requirements below and
# records the full result in scripts/reference-server.lock (`pip freeze`); later installs use the
# lock file. Delete the lock file to re-resolve.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${STATEGRAPH_REF_VENV:-$HOME/.cache/stategraph/ref-venv}"
LOCK="$ROOT/scripts/reference-server.lock"
GRAPH_DIR="$ROOT/bench/agent-server/reference"
STAMP="$VENV/.stategraph-ref-stamp"
START_TIMEOUT="${STATEGRAPH_REF_START_TIMEOUT:-90}"
# Same langgraph / langchain-core / langgraph-sdk as scripts/python-env.sh and the interop venv.
REQUIREMENTS=(
  "langgraph-cli[inmem]==0.4.40"
  "langgraph==1.2.22"
  "langchain==1.4.7"
  "langchain-core==1.7.2"
  "langgraph-sdk==0.4.14"
)

usage() {
  echo "usage: $0 install | start PORT [langgraph-dev-args...] | stop PID" >&2
  exit 2
}

pick_python() {
  local cand
  for cand in "${STATEGRAPH_REF_PYTHON:-}" "$HOME"/.pyenv/versions/3.11*/bin/python3 python3.11 python3; do
    [[ -n "$cand" ]] || continue
    if command -v "$cand" >/dev/null 2>&1 &&
      "$cand" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' 2>/dev/null; then
      command -v "$cand"
      return 0
    fi
  done
  echo "reference-server: no Python 3.11 found (set STATEGRAPH_REF_PYTHON)" >&2
  return 1
}

want_stamp() {
  if [[ -f "$LOCK" ]]; then
    sha256sum "$LOCK" | cut -d' ' -f1
  else
    printf '%s\n' "${REQUIREMENTS[@]}"
  fi
}

do_install() {
  if [[ -x "$VENV/bin/langgraph" && -f "$STAMP" && -f "$LOCK" && "$(cat "$STAMP")" == "$(want_stamp)" ]]; then
    echo "reference-server: venv up to date ($VENV)" >&2
    return 0
  fi
  local py
  py="$(pick_python)"
  echo "reference-server: installing into $VENV (python: $py)" >&2
  if [[ ! -x "$VENV/bin/python" ]]; then
    "$py" -m venv "$VENV"
  fi
  local pip=("$VENV/bin/python" -m pip --disable-pip-version-check --no-input)
  if [[ -f "$LOCK" ]]; then
    "${pip[@]}" install --quiet -r "$LOCK" >&2
  else
    "${pip[@]}" install --quiet "${REQUIREMENTS[@]}" >&2
    "${pip[@]}" freeze --all --exclude pip --exclude setuptools --exclude wheel > "$LOCK"
    echo "reference-server: wrote $LOCK" >&2
  fi
  want_stamp > "$STAMP"
  "$VENV/bin/python" -c 'import langgraph_api, langgraph_runtime_inmem' >&2
}

do_start() {
  local port="${1:-}"
  [[ "$port" =~ ^[0-9]+$ ]] || usage
  shift
  local extra=("$@")
  [[ -x "$VENV/bin/langgraph" ]] || { echo "reference-server: not installed; run '$0 install' first" >&2; exit 1; }
  local log="/tmp/stategraph-reference-server-$port.log"
  if curl -fsS -o /dev/null "http://127.0.0.1:$port/ok" 2>/dev/null; then
    echo "reference-server: something already answers on port $port" >&2
    exit 1
  fi
  # The in-memory runtime persists threads/runs/checkpoints into ./.langgraph_api of its working
  # directory and reloads them on the next start. Run it from a fresh directory under /tmp so every
  # start begins empty and nothing is written into the clone. Graph paths in langgraph.json are
  # resolved against the working directory, so the graph files are copied there.
  local workdir="/tmp/stategraph-reference-server-$port.d"
  rm -rf "$workdir"
  mkdir -p "$workdir"
  cp -r "$GRAPH_DIR"/* "$workdir"/
  # Own session (setsid) so `stop` can end the server's whole process group.
  (
    cd "$workdir"
    LANGGRAPH_CLI_NO_ANALYTICS=1 LANGSMITH_TRACING=false LANGCHAIN_TRACING_V2=false \
      exec setsid "$VENV/bin/langgraph" dev --config langgraph.json \
      --no-browser --no-reload --host 127.0.0.1 --port "$port" ${extra[@]+"${extra[@]}"} \
      </dev/null >"$log" 2>&1
  ) &
  local pid=$!
  local deadline=$((SECONDS + START_TIMEOUT))
  until curl -fsS -o /dev/null "http://127.0.0.1:$port/ok" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "reference-server: server exited during startup; log $log:" >&2
      tail -n 40 "$log" >&2
      exit 1
    fi
    if ((SECONDS >= deadline)); then
      echo "reference-server: no answer from GET http://127.0.0.1:$port/ok after ${START_TIMEOUT}s; log $log:" >&2
      tail -n 40 "$log" >&2
      do_stop "$pid" || true
      exit 1
    fi
    sleep 0.5
  done
  echo "reference-server: up on http://127.0.0.1:$port (log $log)" >&2
  echo "$pid"
}

do_stop() {
  local pid="${1:-}"
  [[ "$pid" =~ ^[0-9]+$ ]] || usage
  kill -0 "$pid" 2>/dev/null || { echo "reference-server: no process $pid" >&2; return 0; }
  # The server is a session/group leader (setsid); signal its group so uvicorn workers go too.
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do
    kill -0 "$pid" 2>/dev/null || { echo "reference-server: stopped $pid" >&2; return 0; }
    sleep 0.25
  done
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  echo "reference-server: killed $pid" >&2
}

case "${1:-}" in
  install) do_install ;;
  start) shift; do_start "$@" ;;
  stop) shift; do_stop "${1:-}" ;;
  *) usage ;;
esac
