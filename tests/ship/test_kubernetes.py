"""The Kubernetes manifests (deploy/kubernetes, a kustomize base): each resource validates strictly
against the schemas of a current Kubernetes release (``kubernetes-validate``), and they hold
together: two replicas on PostgreSQL, probes on /readyz and /healthz, a non-root read-only root
file system, the secrets from a Secret, and a configuration file every key of which is a setting
the broker accepts (the files it names mounted where it says)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from cebroker.cli import SERVE_OPTIONS
from cebroker.options import FilePath
from cebroker.options.config_file import load_config_file

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "kubernetes"
VALIDATE = Path(sys.executable).parent / "kubernetes-validate"


def load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((BASE / name).read_text(encoding="utf-8"))
    return document


def validate(*files: Path) -> subprocess.CompletedProcess[str]:
    if not VALIDATE.exists() and shutil.which("kubernetes-validate") is None:
        pytest.fail("kubernetes-validate is not installed: scripts/bootstrap.sh --dev installs it")
    command = str(VALIDATE) if VALIDATE.exists() else "kubernetes-validate"
    return subprocess.run(
        [command, "--strict", *map(str, files)], capture_output=True, text=True, check=False, timeout=120
    )


def resources() -> list[Path]:
    return [BASE / name for name in load("kustomization.yaml")["resources"]]


def test_every_resource_validates_strictly() -> None:
    result = validate(*resources())
    assert result.returncode == 0, result.stdout + result.stderr
    for path in resources():
        assert f"{path.name} passed" in result.stdout + result.stderr


def test_the_validation_is_strict(tmp_path: Path) -> None:
    """A field Kubernetes does not know is refused (so the test above can fail)."""
    deployment = load("deployment.yaml")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGett"] = {"path": "/"}
    broken = tmp_path / "deployment.yaml"
    broken.write_text(yaml.safe_dump(deployment), encoding="utf-8")
    assert validate(broken).returncode != 0


def test_the_kustomization_names_files_that_exist() -> None:
    kustomization = load("kustomization.yaml")
    assert all(path.is_file() for path in resources())
    for generator in kustomization["configMapGenerator"]:
        assert all((BASE / name).is_file() for name in generator["files"])
    assert {"deployment.yaml", "service.yaml", "poddisruptionbudget.yaml"} <= set(kustomization["resources"])


def container() -> dict[str, Any]:
    (only,) = load("deployment.yaml")["spec"]["template"]["spec"]["containers"]
    return dict(only)


def test_two_instances_on_postgresql_with_probes_and_resources() -> None:
    deployment = load("deployment.yaml")
    assert deployment["spec"]["replicas"] == 2
    broker = container()
    (database,) = [item for item in broker["env"] if item["name"] == "CEBROKER_DB"]
    assert database["valueFrom"]["secretKeyRef"]["name"] == "cebroker"
    assert broker["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert broker["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert set(broker["resources"]["requests"]) == {"cpu", "memory"}
    budget = load("poddisruptionbudget.yaml")
    assert budget["spec"]["minAvailable"] == 1
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert budget["spec"]["selector"]["matchLabels"] == selector
    assert load("service.yaml")["spec"]["selector"] == selector
    assert deployment["spec"]["template"]["metadata"]["labels"].items() >= selector.items()


def test_non_root_with_a_read_only_root_file_system() -> None:
    pod = load("deployment.yaml")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    security = container()["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    # The grace period covers the broker's own (shutdown_grace, 10 s by default).
    assert pod["terminationGracePeriodSeconds"] > 10


def test_the_configuration_file_is_one_the_broker_accepts(tmp_path: Path) -> None:
    """Every key is a setting with a good value; the files it names are in mounted volumes (they
    are replaced by files of the test to load it, as they exist only in the pod)."""
    broker = container()
    assert broker["args"][:3] == ["serve", "--config", "/etc/cebroker/config.toml"]
    mounts = {mount["mountPath"]: mount["name"] for mount in broker["volumeMounts"]}
    assert mounts["/etc/cebroker"] == "config"
    pod = load("deployment.yaml")["spec"]["template"]["spec"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    text = (BASE / "config.toml").read_text(encoding="utf-8")
    files = {option.name for option in SERVE_OPTIONS if isinstance(option.kind, FilePath)}
    named = {key: value for key, value in tomllib.loads(text).items() if key in files}
    assert set(named) == {"secrets_key", "api_keys"}
    for key, value in named.items():
        path = Path(value)
        volume = volumes[mounts[str(path.parent)]]
        assert path.name in [item["path"] for item in volume["secret"]["items"]], key
        stand_in = tmp_path / path.name
        stand_in.write_text("{}", encoding="utf-8")
        text = text.replace(f'"{value}"', f'"{stand_in}"')
    local = tmp_path / "config.toml"
    local.write_text(text, encoding="utf-8")
    values = load_config_file(local, SERVE_OPTIONS).values
    assert values["host"] == "0.0.0.0"
    assert "db" not in values  # from the Secret, by its variable
