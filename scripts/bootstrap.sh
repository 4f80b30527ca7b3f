#!/usr/bin/env bash
# Creates .venv (Python 3.11+) and installs the three packages editable into it.
#   scripts/bootstrap.sh          runtime only (broker, libraries, every protocol extra)
#   scripts/bootstrap.sh --dev    plus the test and lint tools
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  if ! "$PY" -m venv .venv >/dev/null 2>&1; then
    # Debian's python3 ships venv separately.
    rm -rf .venv
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq python3-venv >/dev/null
    "$PY" -m venv .venv
  fi
  .venv/bin/pip install -q -U pip
fi
extras="all"
[ "${1:-}" = "--dev" ] && extras="all,dev"
.venv/bin/pip install -q -e ./filters -e "./protocols[all]" -e ".[${extras}]"
