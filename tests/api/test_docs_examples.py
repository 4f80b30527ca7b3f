"""The curl examples of docs/api.md really work: each ``sh`` block is run verbatim against the
broker served over TCP, and its status line must match the ``http`` block that follows it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send
from support.broker import Broker
from support.servers import ServerThread
from support.sinks import Sink

from cebroker.app import create_app
from cebroker.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
_FENCE = re.compile(r"```(?P<lang>\w*)\n(?P<text>.*?)```", re.DOTALL)


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def examples() -> list[tuple[str, str]]:
    """(shell command, documented answer) for every example in the document, in order."""
    text = DOC.read_text()
    blocks = list(_FENCE.finditer(text))
    return [
        (block["text"], answer["text"])
        for block, answer in zip(blocks, blocks[1:], strict=False)
        # an example is a sh block followed directly by the http block of its answer
        if block["lang"] == "sh"
        and answer["lang"] == "http"
        and not text[block.end() : answer.start()].strip()
    ]


def documented_body(answer: str) -> Any:
    """The JSON body shown in a documented answer, or None when it is abridged (``...``) or absent."""
    _, _, body = answer.partition("\n\n")
    try:
        return json.loads(_UUID.sub("ID", body))
    except ValueError:
        return None


@pytest.fixture
def broker_url(tmp_path: Path) -> Iterator[str]:
    # The documented answers show the broker's own URL: the settings name the port it serves
    # on. The socket is bound first and the app made for its port (a port picked free and bound
    # later could be taken meanwhile by another test's server).
    apps: list[Starlette] = []

    async def delegate(scope: Scope, receive: Receive, send: Send) -> None:
        await apps[0](scope, receive, send)

    server = ServerThread(delegate, force_exit=False)
    apps.append(create_app(Settings(port=server.port, db=tmp_path / "docs.db")))
    with server:
        yield server.url


def test_document_has_examples_for_every_operation() -> None:
    text = "\n".join(sh for sh, _ in examples())
    assert all(sh.lstrip().startswith("curl ") and "```" not in sh for sh, _ in examples())
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


def run_example(command: str, env: dict[str, str]) -> tuple[int, str, str]:
    """(status, lower-cased header block, body) of one example.

    With curl installed the command runs as written. Without it, bash still expands the command
    (variables, quoting, line continuations) but a shell function in place of curl prints the
    arguments, which are then sent with httpx: the request is exactly the one curl would send.
    """
    if shutil.which("curl") is not None:
        result = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, env=env, timeout=30, check=False
        )
        assert result.returncode == 0, (command, result.stderr)
        head, _, body = result.stdout.partition("\n\n")
        return int(head.split()[1]), head.lower(), body
    shim = 'curl() { printf "%s\\0" "$@"; }\n' + command
    printed = subprocess.run(
        ["bash", "-c", shim], capture_output=True, env=env, timeout=30, check=True
    ).stdout
    args = printed.decode().split("\0")[:-1]
    method, headers, data, url = "GET", {}, None, ""
    items = iter(args)
    for arg in items:
        if arg == "-X":
            method = next(items)
        elif arg == "-H":
            name, _, value = next(items).partition(":")
            headers[name.strip()] = value.strip()
        elif arg == "-d":
            data = next(items)
            method = "POST" if method == "GET" else method
        elif not arg.startswith("-"):
            url = arg
    response = httpx.request(method, url, headers=headers, content=data, timeout=30)
    head = "\n".join(f"{k}: {v}" for k, v in response.headers.items())
    return response.status_code, head.lower(), response.text


def test_examples_answer_as_documented(broker_url: str) -> None:
    env = {**os.environ, "BROKER": broker_url, "ID": ""}
    for command, answer in examples():
        status, head, body = run_example(command, env)
        assert status == int(answer.split()[1]), (command, body)
        for line in answer.partition("\n\n")[0].splitlines()[1:]:  # the documented headers
            name, _, value = line.partition(": ")
            actual = re.search(rf"^{re.escape(name.lower())}: (.*)$", head, re.MULTILINE)
            assert actual is not None, (command, name)
            assert _UUID.sub("ID", actual[1]).lower() == _UUID.sub("ID", value).lower(), (command, name)
        expected = documented_body(answer)
        if expected is not None:
            assert json.loads(_UUID.sub("ID", body)) == expected, command
        if not env["ID"] and status == 201:  # "$ID" is the first subscription created
            location = re.search(r"^location: /subscriptions/(\S+)$", head, re.MULTILINE)
            assert location is not None
            env["ID"] = location[1]


README = DOC.parents[1] / "README.md"
#: Every curl call reports its status on stderr, so that stdout stays what the README shows.
_CURL_STATUS = "curl() { command curl -w '%{stderr}@@status %{http_code}\\n' \"$@\"; }\n"


def readme_blocks() -> list[tuple[str, str]]:
    """(heading, commands) of every ``sh`` block of the README's curl section (its protocol ingress
    and Spark examples need servers of their own and are not curl calls)."""
    text = README.read_text()
    text = text[text.index("## Every operation, with curl") : text.index("### Protocol ingress and Spark")]
    found = []
    for block in _FENCE.finditer(text):
        if block["lang"] == "sh" and "$B" in block["text"]:
            heading = [line for line in text[: block.start()].splitlines() if line.startswith("#")][-1]
            found.append((heading, block["text"]))
    return found


def test_readme_examples_run_as_shown(tmp_path: Path, sink: Sink, make_broker: Callable[..., Broker]) -> None:
    """Every command of the README's curl section runs, in order, against a real broker and a
    real sink standing at the example's sink address: no command fails, every answer is 2xx
    except the deliberately bad request, and the example event that should match the example
    subscription is delivered while the one that should not is not."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    blocks = readme_blocks()
    headings = [heading for heading, _ in blocks]
    assert headings[:4] == [
        "### Subscriptions API ([docs/api.md](docs/api.md))",
        "### Events ([docs/pipeline.md](docs/pipeline.md))",
        "### Delivery state, dead letters, metrics",
        "### Replace and delete",
    ]
    broker = make_broker(db=tmp_path / "readme.db")
    env = {**os.environ, "B": broker.url, "ID": ""}
    statuses: list[tuple[str, int]] = []
    for heading, commands in blocks:
        if heading.startswith("### Replace"):  # deliveries first: the replace changes the sink
            got = sink.wait("/hook", 1)
            assert [r.headers["ce-id"] for r in got] == ["1"]
            assert got[0].headers["x-team"] == "billing"
        script = _CURL_STATUS + commands.replace("127.0.0.1:9000", sink.url.removeprefix("http://"))
        script = "set -euo pipefail\n" + script + '\nprintf "@@id %s\\n" "$ID" >&2\n'
        result = subprocess.run(
            ["bash", "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
        )
        assert result.returncode == 0, (heading, result.stderr)
        for line in result.stderr.splitlines():
            if line.startswith("@@status "):
                statuses.append((heading, int(line.split()[1])))
            elif line.startswith("@@id "):
                env["ID"] = line[5:]
        assert env["ID"], "the README's ID line found no subscription"
    refused = [(heading, status) for heading, status in statuses if status >= 300]
    assert refused == [("### Subscriptions API ([docs/api.md](docs/api.md))", 400)]
    assert len(statuses) >= 30
