"""``scripts/serve.sh`` on an installed checkout: no reinstall, no build output, the broker
ready in about a second."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from servers import free_port
from support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.alone
def test_serve_script_starts_quickly_without_reinstalling(tmp_path: Path) -> None:
    if not list((ROOT / ".venv").glob(".bootstrap-*")):
        pytest.skip("this .venv was not made by scripts/bootstrap.sh (no install stamp)")
    fresh = subprocess.run(
        ["bash", str(ROOT / "scripts" / "bootstrap.sh")], capture_output=True, text=True, timeout=600
    )
    assert fresh.returncode == 0, fresh.stderr  # brings the stamp up to date if it was not
    port = free_port()
    started = time.monotonic()
    proc = subprocess.Popen(
        [str(ROOT / "scripts" / "serve.sh"), "--port", str(port), "--db", str(tmp_path / "b.db")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("CEBROKER_")},
        cwd=tmp_path,
    )

    def ready() -> bool:
        assert proc.poll() is None, proc.communicate()[1]
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(ready, 10 - (time.monotonic() - started), "the broker of serve.sh to be ready")
        elapsed = time.monotonic() - started
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert elapsed < 5, f"ready after {elapsed:.1f} s"
    assert "pip" not in err
    assert "Warning" not in err
    assert "Application startup complete" in err
