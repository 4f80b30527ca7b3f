"""docker-compose.yml: the full stack parses with the compose client (no engine needed for
``config``), runs every server the bridge supports, and configures the broker with a source on
each of them that the broker can actually consume; every port is published on the host's
loopback only, the broker waits for each server's health check, and each sink example the docs
give for the stack is accepted by a broker with the stack's settings."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from ceprotocols.egress import IPAddress
from ceprotocols.sources import create_receiver
from support.broker import Broker

from cebroker.cli import build_parser, settings_from_args
from cebroker.settings import Settings
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


def test_every_published_port_is_on_the_hosts_loopback(rendered: dict[str, Any]) -> None:
    """MQTT and NATS take anonymous clients, the passwords are known: nothing is published on the
    host's other interfaces."""
    published = {
        name: [host_ip(port) for port in service.get("ports", [])]
        for name, service in rendered["services"].items()
    }
    assert {name for name, ips in published.items() if ips} == set(rendered["services"]) - {"keys"}
    assert {name: ips for name, ips in published.items() if set(ips) - {"127.0.0.1"}} == {}


def test_the_broker_waits_for_every_server_to_be_healthy(rendered: dict[str, Any]) -> None:
    services = rendered["services"]
    depends = services["cebroker"]["depends_on"]
    for server in ("postgres", "mosquitto", "rabbitmq", "kafka", "nats"):
        assert depends[server]["condition"] == "service_healthy", server
        assert services[server]["healthcheck"]["test"], server
    assert "/readyz" in " ".join(services["cebroker"]["healthcheck"]["test"])


def test_passwords_come_from_the_env_file(rendered: dict[str, Any]) -> None:
    """One .env holds the infrastructure passwords; the compose file refers to them."""
    text = COMPOSE_FILE.read_text(encoding="utf-8")
    env = dict(
        line.split("=", 1)
        for line in (ROOT / ".env").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    )
    assert set(env) == {"POSTGRES_PASSWORD", "RABBITMQ_PASSWORD"}
    assert "${POSTGRES_PASSWORD" in text
    assert "${RABBITMQ_PASSWORD" in text
    assert rendered["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"] == env["POSTGRES_PASSWORD"]
    assert "cebroker:cebroker@" not in text  # no password written in the compose file itself


def documented_sinks() -> list[tuple[str, dict[str, Any]]]:
    """Each subscription body in the docs' compose sections (``## docker-compose...`` or
    ``## docker compose...``: a ``-d '{...}'`` with a sink)."""
    found = []
    for doc in sorted((ROOT / "docs").glob("*.md")):
        text = doc.read_text(encoding="utf-8")
        for section in re.split(r"^## ", text, flags=re.MULTILINE):
            if not section.lower().startswith(("docker-compose", "docker compose")):
                continue
            for body in re.findall(r"-d '(\{.*?\})'", section, flags=re.DOTALL):
                subscription = json.loads(body)
                if "sink" in subscription:
                    found.append((doc.name, subscription))
    return found


class StackNames:
    """The stack's service names, each resolved to an address in the stack's subnet (as compose's
    DNS answers inside the stack); other names are unknown."""

    def __init__(self, services: list[str], subnet: str) -> None:
        network = ipaddress.ip_network(subnet)
        # .1 is the gateway; the services get the next addresses, as compose gives them.
        self.table: dict[str, IPAddress] = {
            name: ipaddress.ip_address(int(network.network_address) + 2 + index)
            for index, name in enumerate(services)
        }

    async def __call__(self, host: str, port: int, /) -> Sequence[IPAddress]:
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} is not a service of the stack")
        return [self.table[host]]


def stack_settings(rendered: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The broker service's settings, read as ``cebroker serve`` reads its variables, except what
    needs the stack itself: the database, the key file and the sources (servers not running)."""
    for variable in [name for name in os.environ if name.startswith("CEBROKER_")]:
        monkeypatch.delenv(variable)
    environment = rendered["services"]["cebroker"]["environment"]
    for variable, value in environment.items():
        if variable not in ("CEBROKER_DB", "CEBROKER_SECRETS_KEY", "CEBROKER_SOURCES"):
            monkeypatch.setenv(variable, str(value))
    settings = settings_from_args(build_parser().parse_args(["serve"]))
    fields = {name: getattr(settings, name) for name in Settings.__dataclass_fields__}
    for name in ("db", "secrets_key", "sources", "host", "port", "base_url"):
        fields.pop(name)
    return fields


def test_the_docs_give_a_sink_on_each_server_of_the_stack() -> None:
    schemes = {urlsplit(subscription["sink"]).hostname for _, subscription in documented_sinks()}
    assert schemes == {"kafka", "mosquitto", "rabbitmq", "nats"}


@pytest.mark.parametrize("documented", documented_sinks(), ids=lambda case: case[1]["sink"].split("@")[-1])
def test_each_documented_sink_is_accepted_by_the_stacks_broker(
    documented: tuple[str, dict[str, Any]],
    rendered: dict[str, Any],
    make_broker: Callable[..., Broker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broker with the stack's own settings takes every sink example of the docs, the names
    resolving into the stack's network; the same broker without the allowed networks refuses
    them (the check holds: compose names are private addresses)."""
    doc, subscription = documented
    subnet = rendered["networks"]["default"]["ipam"]["config"][0]["subnet"]
    names = StackNames(list(rendered["services"]), subnet)
    fields = stack_settings(rendered, monkeypatch)
    assert fields["allow_sink_networks"] == (subnet,)
    broker = make_broker(resolver=names, **fields)
    created = broker.http.post("/subscriptions", json=subscription)
    assert created.status_code == 201, f"{doc}: {created.text}"
    strict = make_broker(resolver=names, **{**fields, "allow_sink_networks": ()})
    refused = strict.http.post("/subscriptions", json=subscription)
    assert refused.status_code == 400, refused.text
    assert "/sink" in [error["pointer"] for error in refused.json()["errors"]]
