"""docker-compose.yml: the full stack parses with the compose client (no engine needed for
``config``), runs every server the bridge supports, and configures the broker with a source on
each of them that the broker can actually consume."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from ceprotocols.sources import create_receiver

from cebroker.storage import create_storage
from cebroker.storage.postgres import PostgresStorage

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"


def compose_command() -> list[str] | None:
    """``docker compose`` when the plugin is there, else ``docker-compose``, else None."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


@pytest.fixture(scope="module")
def rendered() -> dict[str, Any]:
    command = compose_command()
    if command is None:
        pytest.skip(
            "no compose client (docker compose or docker-compose): scripts/install-servers.sh installs one"
        )
    result = subprocess.run(
        [*command, "-f", str(COMPOSE_FILE), "config"], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = yaml.safe_load(result.stdout)
    return config


def test_compose_file_parses_with_every_server(rendered: dict[str, Any]) -> None:
    """The stack has the broker and one server per protocol family."""
    assert set(rendered["services"]) == {
        "keys",
        "cebroker",
        "postgres",
        "mosquitto",
        "rabbitmq",
        "kafka",
        "nats",
    }


def test_two_broker_replicas_share_one_postgres(rendered: dict[str, Any]) -> None:
    """The broker runs as two replicas on the PostgreSQL service, once it is healthy."""
    broker = rendered["services"]["cebroker"]
    assert broker["deploy"]["replicas"] == 2
    storage = create_storage(broker["environment"]["CEBROKER_DB"])
    assert isinstance(storage, PostgresStorage)
    assert storage.name == "postgresql://cebroker:***@postgres:5432/cebroker"
    assert broker["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "healthcheck" in rendered["services"]["postgres"]


# The compose clients render volumes and ports in the long syntax (the plugin) or keep the short
# one (docker-compose 1.x): both are read.
def volume_source(volume: str | dict[str, Any]) -> str:
    return volume.split(":", 1)[0] if isinstance(volume, str) else str(volume["source"])


def host_ip(port: str | dict[str, Any]) -> str:
    return port.rsplit(":", 2)[0] if isinstance(port, str) else str(port.get("host_ip", ""))


def test_the_instances_share_one_secrets_key_made_before_them(rendered: dict[str, Any]) -> None:
    """A database URL has no file beside it for the key: a one-shot service makes it once into a
    volume every replica reads, and the replicas start after it."""
    keys, broker = rendered["services"]["keys"], rendered["services"]["cebroker"]
    assert keys["command"] == ["secrets", "init", "/keys/secrets.key"]
    assert broker["environment"]["CEBROKER_SECRETS_KEY"] == "/keys/secrets.key"
    assert broker["depends_on"]["keys"]["condition"] == "service_completed_successfully"
    assert {volume_source(v) for v in broker["volumes"]} == {"keys"}
    assert {volume_source(v) for v in keys["volumes"]} == {"keys"}


def test_without_credentials_the_broker_is_published_on_loopback_only(rendered: dict[str, Any]) -> None:
    """The try-out stack answers without credentials, so the host reaches it on 127.0.0.1 only."""
    broker = rendered["services"]["cebroker"]
    assert broker["environment"]["CEBROKER_INSECURE_NO_AUTH"] == "true"
    assert broker["environment"].get("CEBROKER_API_KEYS") is None
    assert {host_ip(port) for port in broker["ports"]} == {"127.0.0.1"}


def test_rabbitmq_has_amqp_1_0_and_kafka_runs_kraft(rendered: dict[str, Any]) -> None:
    """RabbitMQ enables its AMQP 1.0 plugin; Kafka runs in KRaft mode (no ZooKeeper)."""
    services = rendered["services"]
    assert "rabbitmq_amqp1_0" in " ".join(services["rabbitmq"]["command"])
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert "zookeeper" not in services


def test_broker_sources_are_consumable(rendered: dict[str, Any]) -> None:
    """Every configured source is a URL the broker accepts, one per protocol."""
    sources = rendered["services"]["cebroker"]["environment"]["CEBROKER_SOURCES"].split()
    receivers = [create_receiver(url) for url in sources]
    assert {url.split(":", 1)[0] for url in sources} == {"mqtt", "kafka", "nats", "amqp"}
    assert all(receiver.source for receiver in receivers)
