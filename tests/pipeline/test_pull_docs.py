"""The shell examples of docs/pull.md run as shown, in order, in one shell session against a
served broker (``curl -f``: any HTTP error fails the script), and end where the page says."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.broker import Broker

DOC = Path(__file__).resolve().parents[2] / "docs" / "pull.md"
_FENCE = re.compile(r"```sh\n(?P<text>.*?)```", re.DOTALL)


@pytest.mark.skipif(shutil.which("curl") is None, reason="the examples use curl")
def test_the_pull_examples_run_as_shown(tmp_path: Path, make_broker: Callable[..., Broker]) -> None:
    broker = make_broker()
    script = "set -euo pipefail\n" + "\n".join(m["text"] for m in _FENCE.finditer(DOC.read_text()))
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env={"BROKER": broker.url, "PATH": "/usr/bin:/bin:/usr/local/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    received = json.loads((tmp_path / "received.json").read_text())["events"]
    assert [e["event"]["id"] for e in received] == ["o-1", "o-2", "o-3"]
    # the last answer printed (the others precede it on the same line: curl adds no newline)
    status = json.loads(done.stdout[done.stdout.rindex('{"id"') :])
    # as the page says: one delivered, one dead-lettered, one pending
    assert (status["delivered"], status["deadlettered"], status["pending"]) == (1, 1, 1)
