"""The container image (Dockerfile): it builds with podman, and ``cebroker serve`` runs from it.

The image is built once per test session (``image`` fixture) on the local stand-ins of the base
images where ``../shared/tools/container-bases`` is beside the clone (which makes them), else on
a base already in podman's store, else on the real base from a registry; with no podman, or
neither a local base nor a reachable registry, the tests are skipped with the reason. The broker
in the image is run with ``buildah run`` on the host's network (``podman run`` cannot set the
container's resource limits on every machine): it must answer ``/readyz``, take a subscription,
deliver an event published to it to an HTTP sink on the host, run as a non-root user, and its
AMQP client (python-qpid-proton, compiled in the build stage) must have TLS.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from servers import free_port
from support.shared import SHARED
from support.sinks import served_sink
from support.waiting import wait_until

pytestmark = pytest.mark.container

ROOT = Path(__file__).resolve().parents[2]
CONTAINER_BASES = SHARED / "tools" / "container-bases"
#: The stand-in the container-bases script makes, tagged as the Dockerfile's pinned base.
STAND_IN = "docker.io/library/python:3.11-slim"
TAG = "localhost/cebroker:test"


def pinned_base() -> str:
    """The base image the Dockerfile pins (its ``PYTHON_IMAGE`` argument's default)."""
    found = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert found, "the Dockerfile pins its base in ARG PYTHON_IMAGE=..."
    return found.group(1)


def run(*command: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout)


def image_exists(name: str) -> bool:
    return run("podman", "image", "exists", name).returncode == 0


@dataclass(frozen=True)
class BuiltImage:
    """The image built for this session, and what its build took."""

    name: str
    seconds: float
    size: int


@pytest.fixture(scope="session")
def image() -> Iterator[BuiltImage]:
    if run("sh", "-c", "command -v podman && command -v buildah").returncode != 0:
        pytest.skip("podman and buildah are not installed (scripts/install-servers.sh installs them)")
    if CONTAINER_BASES.is_file():
        made = run("bash", str(CONTAINER_BASES), timeout=1800)
        assert made.returncode == 0, made.stdout + made.stderr
    pinned = pinned_base()
    tagged = False
    if not image_exists(pinned):
        if image_exists(STAND_IN):
            # The stand-in answers to the pinned name for this build only (a tag that names a
            # precise release cannot be made here; the stand-in is the same series).
            assert run("podman", "tag", STAND_IN, pinned).returncode == 0
            tagged = True
        elif run("podman", "pull", "--quiet", pinned, timeout=600).returncode == 0:
            pass
        else:
            pytest.skip(f"no local base image ({STAND_IN}) and {pinned} cannot be pulled")
    try:
        started = time.monotonic()
        built = run(
            "podman",
            "build",
            "--isolation",
            "chroot",
            "--network",
            "host",
            "--pull=never",  # the base is local by now: pulled, or the stand-in
            "--format",
            "docker",
            "-t",
            TAG,
            str(ROOT),
            timeout=3600,
        )
        seconds = time.monotonic() - started
        assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    finally:
        if tagged:
            run("podman", "untag", pinned, pinned)
    size = int(run("podman", "image", "inspect", "--format", "{{.Size}}", TAG).stdout.strip())
    print(f"\nimage {TAG}: built in {seconds:.0f} s, {size / 1e6:.0f} MB")
    yield BuiltImage(TAG, seconds, size)
    run("podman", "rmi", "--force", TAG)


@pytest.fixture
def container(image: BuiltImage) -> Iterator[str]:
    """A working container of the image (removed afterwards)."""
    made = run("buildah", "from", "--pull-never", image.name)
    assert made.returncode == 0, made.stderr
    name = made.stdout.strip().splitlines()[-1]
    yield name
    run("buildah", "rm", name)


def in_image(container: str, *command: str) -> subprocess.CompletedProcess[str]:
    return run("buildah", "run", "--isolation", "chroot", "--network", "host", container, "--", *command)


def test_the_image_config(image: BuiltImage) -> None:
    """Non-root user, a health check on /readyz, OCI labels, no compiler in the final stage."""
    shown = run("podman", "image", "inspect", image.name)
    assert shown.returncode == 0, shown.stderr
    (config,) = json.loads(shown.stdout)
    user = config["Config"]["User"]
    assert user.split(":")[0] not in ("", "0", "root"), user
    health = config["Healthcheck"]["Test"]  # kept by the docker format only
    assert "/readyz" in " ".join(health)
    labels = config["Config"]["Labels"]
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.version"] == (ROOT / "VERSION").read_text().strip()
    assert labels["org.opencontainers.image.title"] == "cebroker"


def test_no_compiler_and_proton_has_tls(container: str) -> None:
    tls = in_image(container, "python", "-c", "import proton; print(proton.SSL.present())")
    assert tls.returncode == 0, tls.stderr
    assert tls.stdout.strip() == "True"
    compilers = in_image(container, "sh", "-c", "command -v gcc cc; true")
    assert compilers.stdout.strip() == ""
    version = in_image(container, "cebroker", "--version")
    assert version.stdout.strip() == f"cebroker {(ROOT / 'VERSION').read_text().strip()}"


def descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid in /proc/{pid}/status")


def test_serve_from_the_image_delivers_to_a_sink_on_the_host(container: str, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "broker.log"
    command = [
        "buildah",
        "run",
        "--isolation",
        "chroot",
        "--network",
        "host",
        container,
        "--",
        "cebroker",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--allow-sink-networks",
        "127.0.0.0/8",
        "--webhook-validation",
        "off",
    ]
    with log.open("wb") as out:
        # A session of its own, so that the broker under buildah is ended with it.
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:

        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"the broker exited with {proc.returncode}:\n{log.read_text()}")
            try:
                return httpx.get(f"{url}/readyz", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(ready, 60, "the broker in the image to answer /readyz with 200", interval=0.2)
        servers = [pid for pid in descendants(proc.pid) if b"serve" in cmdline(pid)]
        assert servers, "no cebroker serve process under buildah run"
        assert all(uid_of(pid) != 0 for pid in servers), [uid_of(pid) for pid in servers]
        with served_sink() as sink, httpx.Client(base_url=url, timeout=10) as client:
            created = client.post("/subscriptions", json={"protocol": "HTTP", "sink": f"{sink.url}/in"})
            assert created.status_code == 201, created.text
            event = {"specversion": "1.0", "id": "image-1", "source": "/ship", "type": "com.example.shipped"}
            sent = client.post(
                "/events", json=event, headers={"content-type": "application/cloudevents+json"}
            )
            assert sent.status_code == 202, sent.text
            sink.wait("/in", 1, timeout=30)
            assert sink.ids("/in") == ["image-1"]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
