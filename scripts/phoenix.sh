#!/usr/bin/env bash
# Runs Arize Phoenix (PyPI `arize-phoenix`: an OpenTelemetry trace collector with a trace UI,
# offline) for the observability tests: they export a run's spans to it over OTLP and read
# the trace back from its REST API. Idempotent: a second `start` finds it answering and does
# nothing.
#
#   install  creates (once) a venv with arize-phoenix at a pinned version, outside the clone
#            (a stamp file inside it holds the requirement list; same list: nothing to do).
#   start    runs `install`, then starts `phoenix serve` detached (pid file, log and its
#            working directory under ~/.cache/stategraph/phoenix/) unless one already answers
#            on the port, and waits up to 120 s for it.
#   stop     stops the server the pid file names.
#   url      prints its URL.
# `start` and `url` print the URL, http://127.0.0.1:PORT, as their last line (OTLP over HTTP
# at URL/v1/traces, the REST API at URL/v1/…).
#
# Settings: STATEGRAPH_PHOENIX_PORT (default 16006), STATEGRAPH_PHOENIX_VENV (default
# ~/.cache/stategraph/phoenix-venv).
set -euo pipefail

# shellcheck source=scripts/lib/service.sh
source "$(dirname "$0")/lib/service.sh"

VENV="${STATEGRAPH_PHOENIX_VENV:-$HOME/.cache/stategraph/phoenix-venv}"
HOST=127.0.0.1
PORT="${STATEGRAPH_PHOENIX_PORT:-16006}"
GRPC_PORT=$((PORT + 1))
URL="http://$HOST:$PORT"
STATE_DIR="$HOME/.cache/stategraph/phoenix"
PID_FILE="$STATE_DIR/phoenix-$PORT.pid"
LOG_FILE="$STATE_DIR/phoenix-$PORT.log"
WORK_DIR="$STATE_DIR/work-$PORT"
REQUIREMENTS=(
  "arize-phoenix==20.26.1"
)
STAMP="$VENV/.stategraph-requirements"
WANT="$(printf '%s\n' "${REQUIREMENTS[@]}")"

pick_python() {
  local cand
  for cand in "${STATEGRAPH_PHOENIX_PYTHON:-}" "$HOME"/.pyenv/versions/3.11*/bin/python3 python3.11 python3; do
    [[ -n "$cand" ]] || continue
    if command -v "$cand" >/dev/null 2>&1; then command -v "$cand"; return 0; fi
  done
  echo "phoenix: no python3 found (set STATEGRAPH_PHOENIX_PYTHON)" >&2
  return 1
}

install() {
  local py
  if [[ ! -x "$VENV/bin/phoenix" ]] || ! cmp -s <(printf '%s' "$WANT") "$STAMP" 2>/dev/null; then
    py="$(pick_python)"
  fi
  venv_install phoenix "$VENV" "${py:-python3}" "${REQUIREMENTS[@]}"
}

answers() {
  curl -sf -o /dev/null --max-time 2 "$URL/v1/projects" 2>/dev/null
}

running_pid() {
  pid_running "$PID_FILE" phoenix
}

start() {
  install
  mkdir -p "$STATE_DIR" "$WORK_DIR"
  exec 9>"$STATE_DIR/phoenix-$PORT.lock"
  flock 9
  if answers; then
    echo "$URL"
    return 0
  fi
  local pid start_s=$SECONDS
  if pid="$(running_pid)"; then
    echo "phoenix: pid $pid does not answer on $HOST:$PORT, restarting it" >&2
    kill "$pid" 2>/dev/null || true
    sleep 1
  fi
  echo "phoenix: starting Phoenix on $URL (log: $LOG_FILE)" >&2
  echo "--- $(date -u '+%Y-%m-%dT%H:%M:%SZ') start" >> "$LOG_FILE"
  # Offline, no telemetry of its own, no authentication; its SQLite database in WORK_DIR.
  PHOENIX_PORT="$PORT" PHOENIX_HOST="$HOST" PHOENIX_GRPC_PORT="$GRPC_PORT" \
    PHOENIX_WORKING_DIR="$WORK_DIR" PHOENIX_TELEMETRY_ENABLED=false \
    PHOENIX_ENABLE_AUTH=false \
    setsid nohup "$VENV/bin/phoenix" serve < /dev/null >> "$LOG_FILE" 2>&1 9>&- &
  pid=$!
  echo "$pid" > "$PID_FILE"
  while ((SECONDS - start_s < 120)); do
    if answers; then
      echo "phoenix: ready (pid $pid, $((SECONDS - start_s)) s)" >&2
      echo "$URL"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "phoenix: the server exited; the end of $LOG_FILE:" >&2
      tail -n 30 "$LOG_FILE" >&2
      return 1
    fi
    sleep 1
  done
  echo "phoenix: no answer on $URL after 120 s; see $LOG_FILE" >&2
  return 1
}

stop() {
  local pid
  if pid="$(running_pid)"; then
    kill "$pid" 2>/dev/null || true
    rm -f "$PID_FILE"
  fi
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  url) echo "$URL" ;;
  *) echo "usage: $0 install | start | stop | url" >&2; exit 2 ;;
esac
