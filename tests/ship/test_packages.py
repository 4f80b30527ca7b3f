"""The three packages build (``python -m build``: a wheel and an sdist each) and run when installed
from their wheels into a fresh virtualenv, not editable: ``cebroker serve`` from there answers
its console, the API reference (``/docs`` and its assets), the registry and ``/openapi.json``,
and runs the PostgreSQL migrations from the installed package.

Everything the broker reads that is not Python (the console's static files, SQL, JSON) must be
package data for this to pass: the installed broker runs outside the source tree.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import venv
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from servers import free_port
from support.waiting import wait_until

from cebroker.sealing.keys import new_key, write_key_file

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
VERSION = (ROOT / "VERSION").read_text(encoding="utf-8").strip()
PACKAGES = {"cefilters": ROOT / "filters", "ceprotocols": ROOT / "protocols", "cebroker": ROOT}


def run(*command: str | Path, timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, check=False, timeout=timeout
    )
    assert result.returncode == 0, f"{command}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


#: What a build of the source tree never needs: the copy it builds from leaves them out.
NOT_SOURCES = shutil.ignore_patterns(
    ".git",
    ".venv",
    "*.egg-info",
    "build",
    "dist",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    "*.db*",
    "spark-warehouse",
)


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wheels and sdists of the three packages, built from a copy of the source tree: a build
    writes its metadata (``*.egg-info``) and staging directories beside the sources, so builds
    in the tree itself would race each other under pytest-xdist (one build per worker) and read
    a manifest left by an earlier tree."""
    out = tmp_path_factory.mktemp("dist")
    source = tmp_path_factory.mktemp("source") / "tree"
    shutil.copytree(ROOT, source, symlinks=True, ignore=NOT_SOURCES)
    started = time.monotonic()
    for directory in PACKAGES.values():
        # --no-isolation: the build backend of the test environment (the dev extra has it).
        copy = source / directory.relative_to(ROOT)
        run(sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", out, copy)
    print(f"\nbuilt the packages in {time.monotonic() - started:.0f} s")
    return out


@dataclass(frozen=True)
class Installed:
    """A virtualenv with the packages installed from their wheels."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def cebroker(self) -> Path:
        return self.root / "bin" / "cebroker"


@pytest.fixture(scope="session")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("venv") / "v"
    venv.EnvBuilder(with_pip=True).create(root)
    env = Installed(root)
    wheels = {name: next(dist.glob(f"{name}-{VERSION}-*.whl")) for name in PACKAGES}
    started = time.monotonic()
    # The three wheels from here; their dependencies from the package index.
    run(
        env.python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        wheels["cefilters"],
        wheels["ceprotocols"],
        f"{wheels['cebroker']}[postgres]",
    )
    print(f"\ninstalled the wheels in {time.monotonic() - started:.0f} s")
    return env


def test_a_wheel_and_an_sdist_of_each_package(dist: Path) -> None:
    for name in PACKAGES:
        (wheel,) = dist.glob(f"{name}-{VERSION}-py3-none-any.whl")
        (sdist,) = dist.glob(f"{name}-{VERSION}.tar.gz")
        with tarfile.open(sdist) as archive:
            names = {member.split("/", 1)[-1] for member in archive.getnames()}
        assert {"LICENSE", "VERSION", "pyproject.toml"} <= names, name
        with zipfile.ZipFile(wheel) as archive:
            files = set(archive.namelist())
        assert f"{name}/py.typed" in files
        assert any(item.endswith("licenses/LICENSE") for item in files), name
    with zipfile.ZipFile(next(dist.glob("cebroker-*.whl"))) as archive:
        files = set(archive.namelist())
    static = ROOT / "src" / "cebroker" / "console" / "static"
    assert {f"cebroker/console/static/{path.relative_to(static)}" for path in static.rglob("*.*")} <= files


def test_the_installed_packages_are_not_the_source_tree(installed: Installed) -> None:
    shown = run(
        installed.python,
        "-c",
        "import cebroker, cefilters, ceprotocols; print(cebroker.__file__, cefilters.__file__,"
        " ceprotocols.__file__, cebroker.__version__)",
    ).stdout.split()
    assert all("site-packages" in path for path in shown[:3]), shown
    assert shown[3] == VERSION
    assert run(installed.cebroker, "--version").stdout.strip() == f"cebroker {VERSION}"


class Served:
    """``cebroker serve`` of the virtualenv on a free port, ended by its own PID."""

    def __init__(self, installed: Installed, directory: Path, *flags: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = directory / "broker.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CEBROKER_")}
        with self.log.open("wb") as out:
            # The working directory is outside the source tree, so nothing is read from it.
            self.proc = subprocess.Popen(
                [installed.cebroker, "serve", "--port", str(self.port), *flags],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=directory,
                env=env,
            )

    def ready(self) -> None:
        def answers() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"exited with {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                return httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(answers, 60, "the installed broker to answer /readyz", interval=0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)


@pytest.fixture
def served(installed: Installed, tmp_path: Path) -> Iterator[Served]:
    broker = Served(installed, tmp_path, "--db", str(tmp_path / "broker.db"))
    try:
        broker.ready()
        yield broker
    finally:
        broker.stop()


def test_console_docs_registry_and_openapi_from_the_installed_package(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=10) as client:
        console = client.get("/console")
        assert console.status_code == 200
        assert "text/html" in console.headers["content-type"]
        assert client.get("/console/assets/app.js").status_code == 200
        docs = client.get("/docs")
        assert docs.status_code == 200
        assert "/docs/assets/swagger-ui-bundle.js" in docs.text
        assert client.get("/docs/assets/swagger-ui-bundle.js").status_code == 200
        assert client.get("/console/assets/docs.js").status_code == 200
        openapi = client.get("/openapi.json")
        assert openapi.status_code == 200
        assert openapi.json()["info"]["version"] == VERSION
        model = client.get("/model")
        assert model.status_code == 200, model.text
        assert "groups" in model.json()
        assert client.get("/capabilities").status_code == 200


@pytest.mark.postgres
def test_the_postgresql_migrations_run_from_the_installed_package(
    installed: Installed, postgres_url: str, tmp_path: Path
) -> None:
    key = tmp_path / "secrets.key"
    write_key_file(key, (new_key(),), exclusive=True)
    broker = Served(installed, tmp_path, "--db", postgres_url, "--secrets-key-file", str(key))
    try:
        broker.ready()
        created = httpx.post(
            f"{broker.url}/subscriptions",
            json={"protocol": "HTTP", "sink": "https://hooks.example/in"},
            timeout=10,
        )
        assert created.status_code == 201, created.text
    finally:
        broker.stop()
    with psycopg.connect(postgres_url) as connection:
        components = {row[0] for row in connection.execute("SELECT component FROM schema_versions")}
    assert {"storage", "subscriptions", "deliveries", "registry"} <= components
