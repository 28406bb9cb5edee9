#!/usr/bin/env bash
# Installs Prometheus (Debian's `prometheus` package: the server and `promtool`) for the
# metrics tests, which start their own Prometheus on a scratch directory and port. Idempotent:
# nothing to do when both binaries are on the PATH. Prints the server binary's path.
#
#   scripts/prometheus.sh install
set -euo pipefail

case "${1:-install}" in
  install)
    if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
      echo "prometheus: installing Debian's prometheus package (server and promtool)" >&2
      if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
      $SUDO apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 || {
        $SUDO apt-get update -q >/dev/null 2>&1
        $SUDO apt-get install -y -q --no-install-recommends prometheus >&2
      }
    fi
    command -v prometheus
    ;;
  *) echo "usage: $0 install" >&2; exit 2 ;;
esac
