#!/usr/bin/env bash
# Creates .venv (Python 3.11+) and installs the three packages editable into it.
#   scripts/bootstrap.sh          runtime only (broker, libraries, every protocol extra)
#   scripts/bootstrap.sh --dev    plus the test and lint tools
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/pip install -q -U pip
fi
extras="all"
[ "${1:-}" = "--dev" ] && extras="all,dev"
.venv/bin/pip install -q -e ./filters -e "./protocols[all]" -e ".[${extras}]"
