#!/usr/bin/env bash
# Creates (once) the Python environment the interop tests and the benchmark comparison use:
# Python LangGraph and its savers, LangGraph's Python SDK, the official MCP client and the A2A
# SDK, at pinned versions, in a venv outside the clone. A second run finds the stamp and does
# nothing. Prints the venv's python as its last line.
set -euo pipefail

VENV="${STATEGRAPH_PY_VENV:-$HOME/.cache/stategraph/py-venv}"
REQUIREMENTS=(
  "langgraph==1.2.22"
  "langgraph-checkpoint==4.3.2"
  "langgraph-checkpoint-sqlite==3.1.2"
  "langgraph-checkpoint-postgres==3.2.0"
  "langgraph-checkpoint-mongodb==0.5.1"
  "langchain-mongodb==0.12.1"
  "langgraph-sdk==0.4.14"
  "langgraph-swarm==0.1.0"
  "mcp==2.3.0"
  "a2a-sdk==1.3.0"
  "grandalf==0.8"
  "langchain==1.4.7"
  "langchain-core==1.7.2"
  "langchain-openai==1.7.3"
  "openai==3.57.0"
  "ormsgpack==1.13.1"
  "psycopg[binary]==3.2.10"
  "pycryptodome==3.23.0"
  "pymongo==4.20.1"
  "redis==6.4.0"
)
STAMP="$VENV/.stategraph-requirements"
WANT="$(printf '%s\n' "${REQUIREMENTS[@]}")"

if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
  echo "python env: up to date ($VENV)" >&2
else
  echo "python env: installing into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${REQUIREMENTS[@]}" >&2
  printf '%s' "$WANT" > "$STAMP"
fi
echo "$VENV/bin/python"
