#!/usr/bin/env bash
# Installs (once) the third-party MCP servers the MCP client's tests talk to, and the Python
# adapters (`langchain-mcp-adapters`) its results are compared with, at pinned versions, under
# one directory outside the clone:
#   servers/     a venv with PyPI's mcp-server-time and mcp-server-git (they need MCP's Python
#                SDK 2.x),
#   adapters/    a venv with langchain-mcp-adapters (it needs the SDK 1.x, hence its own venv),
#   everything/  npm's @modelcontextprotocol/server-everything (stdio and streamable HTTP).
# A second run finds the stamp and does nothing. Prints the directory as its last line (the
# tests read it from STATEGRAPH_MCP_DIR).
set -euo pipefail

DIR="${STATEGRAPH_MCP_DIR:-$HOME/.cache/stategraph/mcp}"
SERVERS=("mcp-server-time==2026.10.19" "mcp-server-git==2026.10.19" "mcp==2.3.0")
ADAPTERS=("langchain-mcp-adapters==0.3.2" "langchain-core==1.7.2" "mcp==1.30.0")
EVERYTHING="@modelcontextprotocol/server-everything@2026.8.31"
STAMP="$DIR/.stategraph-stamp"
WANT="$(printf '%s\n' "${SERVERS[@]}" "${ADAPTERS[@]}" "$EVERYTHING")"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
  echo "mcp servers: up to date ($DIR)" >&2
  echo "$DIR"
  exit 0
fi
command -v npm >/dev/null || { echo "mcp servers: npm is not installed (Node.js 18 or newer is needed)" >&2; exit 1; }
mkdir -p "$DIR"
rm -f "$STAMP"

venv() { # venv NAME PACKAGES...
  local venv="$DIR/$1"
  shift
  echo "mcp servers: installing $* into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" >&2
}
venv servers "${SERVERS[@]}"
venv adapters "${ADAPTERS[@]}"

mkdir -p "$DIR/everything"
(
  cd "$DIR/everything"
  [[ -f package.json ]] || printf '{"name":"stategraph-mcp-servers","private":true}\n' > package.json
  echo "mcp servers: installing $EVERYTHING into $DIR/everything" >&2
  npm install --no-audit --no-fund --silent --save-exact "$EVERYTHING" >&2
)

# Each server answers `initialize` before the stamp says it is installed.
"$DIR/servers/bin/python" - "$DIR" >&2 <<'EOF'
import json, subprocess, sys
d = sys.argv[1]
init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "stategraph-setup", "version": "0"}}}
for cmd in ([f"{d}/servers/bin/mcp-server-time"], [f"{d}/servers/bin/mcp-server-git"],
            ["node", f"{d}/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js", "stdio"]):
    p = subprocess.run(cmd, input=json.dumps(init) + "\n", capture_output=True, text=True, timeout=60)
    answer = next((json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")), None)
    if not answer or "result" not in answer:
        sys.exit(f"mcp servers: {cmd[-1]} did not answer initialize: {p.stdout!r} {p.stderr[-500:]!r}")
    print(f"mcp servers: {answer['result']['serverInfo']['name']} answers", file=sys.stderr)
EOF
printf '%s' "$WANT" > "$STAMP"
echo "$DIR"
