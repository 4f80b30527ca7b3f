"""Collecting the fuzz modules starts no broker: their schema is read from the app's document at
import, and the app runs only inside the tests (schemathesis starts and stops its lifespan around
each one), so a collection that runs no test leaves no storage to stop at exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FUZZ_MODULES = ["tests/api/test_fuzz.py", "tests/security/test_fuzz_authenticated.py"]


def test_collecting_the_fuzz_modules_is_clean() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *FUZZ_MODULES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "Traceback" not in output, output
    assert "failed" not in output, output
