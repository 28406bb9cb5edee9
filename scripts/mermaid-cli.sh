#!/usr/bin/env bash
# The Mermaid CLI (npm @mermaid-js/mermaid-cli, pinned) on Debian's headless Chromium, for the
# test that renders stategraph's drawings to PNG. Idempotent: a second run finds the stamp and
# the browser and does nothing. Puppeteer's own browser download is skipped (it cannot be
# fetched here); mmdc runs Debian's /usr/bin/chromium instead, through a puppeteer config
# written next to it.
#
#   scripts/mermaid-cli.sh install          # prints the directory holding `render`
#   scripts/mermaid-cli.sh render IN.mmd OUT.png
set -euo pipefail

VERSION="11.12.0"
DIR="${STATEGRAPH_MERMAID_CLI_DIR:-$HOME/.cache/stategraph/mermaid-cli}"
STAMP="$DIR/.stategraph-stamp"
WANT="@mermaid-js/mermaid-cli@$VERSION"
CHROMIUM=/usr/bin/chromium

install() {
  if [[ ! -x "$CHROMIUM" ]]; then
    echo "mermaid-cli: installing Debian's chromium package" >&2
    if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 || {
      $SUDO apt-get update -q >/dev/null 2>&1
      $SUDO apt-get install -y -q --no-install-recommends chromium >&2
    }
  fi
  if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" && -x "$DIR/node_modules/.bin/mmdc" ]]; then
    echo "$DIR"
    return
  fi
  command -v npm >/dev/null || { echo "mermaid-cli: npm is not installed (Node.js 18 or newer is needed)" >&2; exit 1; }
  mkdir -p "$DIR"
  cd "$DIR"
  [[ -f package.json ]] || printf '{"name":"stategraph-mermaid-cli","private":true}\n' > package.json
  # The flags the machine's closed network needs: no sandbox (root), no GPU, no background
  # connections.
  cat > puppeteer.json <<JSON
{
  "executablePath": "$CHROMIUM",
  "args": ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"]
}
JSON
  echo "mermaid-cli: installing $WANT into $DIR" >&2
  PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-audit --no-fund --silent --save-exact "$WANT" >&2
  echo "$WANT" > "$STAMP"
  echo "$DIR"
}

case "${1:-install}" in
  install) install ;;
  render)
    [[ $# -eq 3 ]] || { echo "usage: $0 render IN.mmd OUT.png" >&2; exit 2; }
    exec "$DIR/node_modules/.bin/mmdc" --quiet -p "$DIR/puppeteer.json" -i "$2" -o "$3"
    ;;
  *) echo "usage: $0 install | render IN.mmd OUT.png" >&2; exit 2 ;;
esac
