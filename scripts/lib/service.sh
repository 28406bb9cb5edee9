# Shared by the scripts that install a Python tool into a venv of their own and run it as a
# background service (scripts/mongo-server.sh, scripts/phoenix.sh). Source it; it defines:
#
#   venv_install NAME VENV PYTHON REQUIREMENT...
#       creates VENV with PYTHON and pip-installs the requirements, unless a stamp file in
#       VENV already lists exactly them (then it does nothing).
#   pid_running PID_FILE PATTERN
#       prints the pid in PID_FILE when that process is alive and its command line contains
#       PATTERN (so a recycled pid is not mistaken for the service); fails otherwise.

venv_install() {
  local name="$1" venv="$2" py="$3"
  shift 3
  local stamp="$venv/.stategraph-requirements" want
  want="$(printf '%s\n' "$@")"
  if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    return 0
  fi
  echo "$name: installing $* into $venv" >&2
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" >&2
  printf '%s' "$want" > "$stamp"
}

pid_running() {
  local pid_file="$1" pattern="$2" pid
  [[ -f "$pid_file" ]] || return 1
  pid="$(cat "$pid_file")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$pattern" || return 1
  echo "$pid"
}
