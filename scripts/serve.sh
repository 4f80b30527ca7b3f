#!/usr/bin/env bash
# Starts the broker on its embedded defaults (SQLite file in the working directory, 127.0.0.1:8080).
# Any argument is passed to `cebroker serve`, e.g. scripts/serve.sh --port 9000.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/bootstrap.sh"
exec "$root/.venv/bin/cebroker" serve "$@"
