#!/usr/bin/env bash
# Creates .venv (Python 3.11+) and installs the three packages editable into it.
#   scripts/bootstrap.sh          runtime only (broker, libraries, every protocol extra)
#   scripts/bootstrap.sh --dev    plus the test and lint tools
# Once an install has succeeded, a stamp in .venv records the hash of what it was made from (the
# three pyproject.toml files, this script, the Python version); while that still matches, the
# script returns at once, so scripts/serve.sh starts without reinstalling anything.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
extras="all"
[ "${1:-}" = "--dev" ] && extras="all,dev"
fingerprint() {
  { cat pyproject.toml filters/pyproject.toml protocols/pyproject.toml scripts/bootstrap.sh
    .venv/bin/python -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1
}
stamp=".venv/.bootstrap-${extras}"
if [ -x .venv/bin/python ]; then
  current=$(fingerprint)
  # A development install holds the runtime one as well.
  for done in "$stamp" .venv/.bootstrap-all,dev; do
    if [ -f "$done" ] && [ "$(cat "$done")" = "$current" ]; then
      [ "$extras" = "all,dev" ] && [ "$done" != "$stamp" ] && continue
      exit 0
    fi
  done
fi
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
rm -f .venv/.bootstrap-*
.venv/bin/pip install -q -e ./filters -e "./protocols[all]" -e ".[${extras}]"
fingerprint > "$stamp"
