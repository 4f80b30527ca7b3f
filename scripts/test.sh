#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: installs the servers and the packages, checks lint
# and types, then runs every test (real servers included), one pytest-xdist worker per core (the
# lanes and the groups: tests/README.md). Extra arguments go to pytest (`-n 0`: one process).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-servers.sh
scripts/bootstrap.sh --dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
set +e
.venv/bin/python -m pytest -n auto --dist loadgroup "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: the test setup is broken" >&2
  exit 1
fi
exit "$rc"
