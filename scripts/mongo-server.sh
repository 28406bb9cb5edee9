#!/usr/bin/env bash
# Runs a MongoDB-compatible server for the MongoDB tests: mongoeco, a MongoDB wire-protocol
# server written in Python (not MongoDB; no MongoDB server is installable here), on an in-memory
# engine, via scripts/interop/mongoeco_server.py. Idempotent: a second `start` finds the server
# answering and does nothing.
#
#   install  creates (once) a Python 3.13 venv with mongoeco and pymongo at pinned versions,
#            outside the clone; a stamp file inside it holds the requirement list, and a later
#            run with the same list does nothing. Python 3.13 comes from pyenv
#            (`pyenv install -s 3.13.0` when none is installed).
#   start    runs `install`, then starts the server detached in the background (it outlives
#            the calling shell; pid file and log under ~/.cache/stategraph/mongoeco/) unless one
#            already answers `ping` on the port, and waits up to 30 s for it.
#   stop     stops the server the pid file names.
#   url      prints the server's URL.
# `start` and `url` print the URL, mongodb://127.0.0.1:PORT/?directConnection=true, as their
# last line.
#
# Settings: STATEGRAPH_MONGOECO_PORT (default 27117), STATEGRAPH_MONGOECO_VENV (default
# ~/.cache/stategraph/mongoeco-venv).
set -euo pipefail

# shellcheck source=scripts/lib/service.sh
source "$(dirname "$0")/lib/service.sh"

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${STATEGRAPH_MONGOECO_VENV:-$HOME/.cache/stategraph/mongoeco-venv}"
HOST=127.0.0.1
PORT="${STATEGRAPH_MONGOECO_PORT:-27117}"
URL="mongodb://$HOST:$PORT/?directConnection=true"
STATE_DIR="$HOME/.cache/stategraph/mongoeco"
PID_FILE="$STATE_DIR/mongoeco-$PORT.pid"
LOG_FILE="$STATE_DIR/mongoeco-$PORT.log"
REQUIREMENTS=(
  "mongoeco==4.11.0"
  "pymongo==4.20.1"
)
STAMP="$VENV/.stategraph-requirements"
WANT="$(printf '%s\n' "${REQUIREMENTS[@]}")"

# A Python 3.13 interpreter: pyenv's (installing 3.13.0 if it has none), else python3.13.
find_python313() {
  local root py
  root="$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")"
  for py in "$root"/versions/3.13*/bin/python3; do
    if [[ -x "$py" ]]; then echo "$py"; return 0; fi
  done
  if command -v pyenv >/dev/null 2>&1; then
    echo "mongo-server: installing Python 3.13.0 with pyenv" >&2
    pyenv install -s 3.13.0 >&2
    py="$root/versions/3.13.0/bin/python3"
    if [[ -x "$py" ]]; then echo "$py"; return 0; fi
  fi
  if command -v python3.13 >/dev/null 2>&1; then command -v python3.13; return 0; fi
  echo "mongo-server: mongoeco needs Python 3.13; found none under $root/versions, and" \
    "pyenv is missing or 'pyenv install -s 3.13.0' failed" >&2
  return 1
}

install() {
  local py
  if [[ ! -x "$VENV/bin/python" ]] || ! cmp -s <(printf '%s' "$WANT") "$STAMP" 2>/dev/null; then
    py="$(find_python313)"
  fi
  venv_install mongo-server "$VENV" "${py:-python3}" "${REQUIREMENTS[@]}"
}

# Whether a server answers `ping` on the port (1 s timeouts; a closed port fails at once).
answers() {
  (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null || return 1
  "$VENV/bin/python" - "$URL" >/dev/null 2>&1 <<'PY'
import sys
from pymongo import MongoClient

c = MongoClient(sys.argv[1], serverSelectionTimeoutMS=1000, connectTimeoutMS=1000, socketTimeoutMS=2000)
try:
    c.admin.command("ping")
finally:
    c.close()
PY
}

# The pid in the pid file when that process is still our server.
running_pid() {
  pid_running "$PID_FILE" mongoeco_server.py
}

start() {
  install
  mkdir -p "$STATE_DIR"
  # One `start` at a time; the server itself must not inherit the lock (fd 9).
  exec 9>"$STATE_DIR/mongoeco-$PORT.lock"
  flock 9
  if answers; then
    echo "$URL"
    return 0
  fi
  local pid start_s=$SECONDS
  if pid="$(running_pid)"; then
    echo "mongo-server: pid $pid does not answer on $HOST:$PORT, restarting it" >&2
    kill "$pid" 2>/dev/null || true
    sleep 1
  fi
  echo "mongo-server: starting mongoeco on $HOST:$PORT (log: $LOG_FILE)" >&2
  echo "--- $(date -u '+%Y-%m-%dT%H:%M:%SZ') start" >> "$LOG_FILE"
  # A non-interactive shell's background job is no process-group leader, so setsid execs
  # in place and $! is the server's pid.
  setsid nohup "$VENV/bin/python" "$ROOT/scripts/interop/mongoeco_server.py" "$HOST" "$PORT" \
    < /dev/null >> "$LOG_FILE" 2>&1 9>&- &
  pid=$!
  echo "$pid" > "$PID_FILE"
  while ((SECONDS - start_s < 30)); do
    if answers; then
      echo "mongo-server: mongoeco ready (pid $pid, $((SECONDS - start_s)) s)" >&2
      echo "$URL"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.5
  done
  echo "mongo-server: mongoeco did not answer on $HOST:$PORT; end of $LOG_FILE:" >&2
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
    echo "mongo-server: stopped pid $pid" >&2
  else
    echo "mongo-server: not running (no live pid in $PID_FILE)" >&2
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
