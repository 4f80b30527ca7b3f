"""Interop: the xRegistry command-line tool ``xrcg`` (from PyPI) validates the broker's
``/export`` of a registry holding every sample of the spec, and generates code from it.

The tool is installed into a virtualenv of its own, kept between runs in
``$CEBROKER_TEST_CACHE`` (default ``~/.cache/cebroker-tests``): the first run needs PyPI.
``xrcg`` exits 0 even when it reports errors, so the test reads what it prints and the files it
writes. The only errors accepted are its failures to fetch documents that the samples place on
other hosts (``schemaurl``s outside this registry: this test does not reach them).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.broker import Broker
from support.shared import XREGISTRY_SAMPLES

from registry.support import SCENARIOS

#: the version checked (a newer one may read documents differently)
XRCG = "xrcg==0.11.0"
CACHE = Path(os.environ.get("CEBROKER_TEST_CACHE", Path.home() / ".cache" / "cebroker-tests"))
#: what xrcg logs when it cannot fetch a document from another host
FETCH_ERROR = re.compile(r" - ERROR - URL error loading (https?://\S+): ")


@pytest.fixture(scope="session")
def xrcg() -> Path:
    """The ``xrcg`` executable of a virtualenv made for it (once; reused while it works)."""
    venv = CACHE / f"xrcg-{XRCG.split('==')[1]}"
    tool = venv / "bin" / "xrcg"
    if not tool.exists():
        venv.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", XRCG],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert done.returncode == 0, f"pip install {XRCG} failed (this test needs PyPI once):\n{done.stderr}"
    return tool


def _run(tool: Path, *args: str, cwd: Path) -> str:
    done = subprocess.run(
        [str(tool), *args], capture_output=True, text=True, timeout=600, cwd=cwd, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _errors(output: str, base: str) -> list[str]:
    """The lines of ``output`` that report a problem, except fetches of other hosts' documents."""
    found = []
    for line in output.splitlines():
        fetch = FETCH_ERROR.search(line)
        if fetch and not fetch.group(1).startswith(base):
            continue
        if "ERROR" in line or "Error" in line or line.startswith("! at") or "Traceback" in line:
            found.append(line[:300])
    return found


@XREGISTRY_SAMPLES.needed
def test_xrcg_validates_and_generates_from_the_export(
    make_broker: Callable[..., Broker], xrcg: Path, tmp_path: Path
) -> None:
    broker = make_broker()
    for sample in sorted(SCENARIOS.glob("*.xreg.json")):
        r = broker.http.post("/", json=json.loads(sample.read_text()))
        assert r.status_code == 200, (sample.name, r.text[:300])
    export = broker.http.get("/export")
    assert export.status_code == 200
    document = tmp_path / "export.json"
    document.write_bytes(export.content)
    exported = export.json()
    messages = sum(len(g.get("messages", {})) for g in exported["messagegroups"].values())
    assert messages >= 50  # every sample is there

    output = _run(xrcg, "validate", "-d", str(document), cwd=tmp_path)
    assert f"OK: definitions file(s) {document} is valid" in output, output[-2000:]
    assert _errors(output, broker.url) == []

    out_dir = tmp_path / "generated"
    args = ["--language", "py", "--style", "producer", "--projectname", "demo", "--output", str(out_dir)]
    output = _run(xrcg, "generate", *args, "-d", str(document), cwd=tmp_path)
    assert _errors(output, broker.url) == []
    code = (out_dir / "demo" / "demo" / "producer_client.py").read_text()
    # one producer class per message group, one send method per message definition
    assert code.count("EventProducer:") == len(exported["messagegroups"])
    assert len(re.findall(r"def send_\w+\(", code)) == messages
    compile(code, "producer_client.py", "exec")
