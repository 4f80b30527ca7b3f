"""The curl examples of docs/api.md really work: each ``sh`` block is run verbatim against the
broker served over TCP, and its status line must match the ``http`` block that follows it."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from cebroker.app import create_app
from cebroker.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
_PAIR = re.compile(r"```sh\n(?P<sh>.*?)```\s*```http\n(?P<http>.*?)```", re.DOTALL)


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def examples() -> list[tuple[str, str]]:
    """(shell command, documented answer) for every example in the document, in order."""
    return [(m["sh"], m["http"]) for m in _PAIR.finditer(DOC.read_text())]


def documented_body(answer: str) -> Any:
    """The JSON body shown in a documented answer, or None when it is abridged (``...``) or absent."""
    _, _, body = answer.partition("\n\n")
    try:
        return json.loads(_UUID.sub("ID", body))
    except ValueError:
        return None


@pytest.fixture
def broker_url(tmp_path: Path) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = Settings(port=port, db=tmp_path / "docs.db")
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=20)


def test_document_has_examples_for_every_operation() -> None:
    text = "\n".join(sh for sh, _ in examples())
    assert sum(documented_body(answer) is not None for _, answer in examples()) >= 10
    for needle in (
        "-X POST",
        "?protocol=",
        "cursor=",
        "-X PUT",
        "If-Match",
        "-X DELETE",
        "-X OPTIONS",
        "openapi.json",
    ):
        assert needle in text, needle


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_examples_answer_as_documented(broker_url: str) -> None:
    env = {**os.environ, "BROKER": broker_url, "ID": ""}
    for command, answer in examples():
        status = int(answer.split()[1])
        result = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, env=env, timeout=30, check=False
        )
        assert result.returncode == 0, (command, result.stderr)
        head = result.stdout.splitlines()[0]
        assert head.split()[1] == str(status), (command, result.stdout)
        expected = documented_body(answer)
        if expected is not None:
            actual = json.loads(_UUID.sub("ID", result.stdout.partition("\n\n")[2]))
            assert actual == expected, command
        if not env["ID"] and status == 201:  # "$ID" is the first subscription created
            location = re.search(
                r"^location: /subscriptions/(\S+)$", result.stdout, re.MULTILINE | re.IGNORECASE
            )
            assert location is not None
            env["ID"] = location[1]
