"""The server fixtures themselves: each server starts on 127.0.0.1, answers its protocol, and
comes back on the same port after a restart."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from servers import MosquittoServer, NatsServer, PostgresServer, RabbitMQServer, TansuServer
from servers.base import ServerProcess, port_open


@pytest.mark.parametrize("kind", [MosquittoServer, NatsServer, TansuServer], ids=lambda k: k.name)
def test_private_server_restarts_on_the_same_port(
    kind: type[ServerProcess], server_factory: Callable[..., ServerProcess]
) -> None:
    """stop() closes the port; restart() listens on it again."""
    server = server_factory(kind)
    assert port_open(server.port)
    server.stop()
    assert not port_open(server.port)
    server.start()
    assert port_open(server.port)


@pytest.mark.mqtt
def test_mosquitto_with_users_rejects_anonymous(server_factory: Callable[..., MosquittoServer]) -> None:
    """A server created with users refuses a client without credentials."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    server = server_factory(MosquittoServer, users={"alice": "s3cret"})
    for user, expected in ((None, False), ("alice", True)):
        client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
        if user:
            client.username_pw_set(user, "s3cret")
        result: list[bool] = []
        client.user_data_set(result)
        client.on_connect = lambda c, outcome, f, rc, p: outcome.append(not rc.is_failure)
        client.connect(server.host, server.port)
        for _ in range(50):
            client.loop(0.1)
            if result:
                break
        client.disconnect()
        assert result == [expected]


@pytest.mark.amqp
def test_rabbitmq_speaks_amqp_1_0(rabbitmq: RabbitMQServer) -> None:
    """The shared RabbitMQ accepts an AMQP 1.0 connection and round-trips a message."""
    from proton import Message
    from proton.utils import BlockingConnection

    conn = BlockingConnection(rabbitmq.url, timeout=10)
    try:
        receiver = conn.create_receiver("/queue/server-smoke")
        conn.create_sender("/queue/server-smoke").send(Message(body="hi"))
        assert receiver.receive(timeout=10).body == "hi"
        receiver.accept()
    finally:
        conn.close()


@pytest.mark.nats
async def test_nats_token_auth(server_factory: Callable[..., NatsServer]) -> None:
    """A token-protected server accepts the token."""
    import nats

    server = server_factory(NatsServer, token="tok")
    client = await nats.connect(server.url, token="tok", connect_timeout=2, max_reconnect_attempts=0)
    await client.flush(timeout=2)
    await client.close()
    await asyncio.sleep(0)


@pytest.mark.postgres
def test_postgres_restarts_and_gives_each_test_its_own_database(
    server_factory: Callable[..., PostgresServer],
) -> None:
    """A private cluster answers SQL, keeps a committed row across a fast restart, and hands out
    distinct empty databases."""
    server = server_factory(PostgresServer)
    first, second = server.create_database(), server.create_database()
    assert first != second
    db = first.rsplit("/", 1)[1]
    server.psql("CREATE TABLE t (n int); INSERT INTO t VALUES (42)", database=db)
    server.restart()
    result = server.psql("SELECT n FROM t", database=db)
    assert result.stdout.split() == ["n", "----", "42", "(1", "row)"]
    assert server.psql("SELECT 1 FROM t", database=second.rsplit("/", 1)[1], check=False).returncode != 0


@pytest.mark.postgres
def test_postgres_copies_of_a_template_hold_what_it_was_filled_with_each_on_its_own(
    server_factory: Callable[..., PostgresServer],
) -> None:
    """A template filled once is copied whole into each new database; a copy's changes stay its
    own, and the template takes no connections (so copying it never waits for one)."""
    server = server_factory(PostgresServer)
    filled: list[str] = []

    def fill(url: str) -> None:
        filled.append(url)
        server.psql("CREATE TABLE t (n int); INSERT INTO t VALUES (7)", database=url.rsplit("/", 1)[1])

    template = server.create_template(fill)
    assert filled == [server.url(template)]
    first, second = (server.create_database(template=template).rsplit("/", 1)[1] for _ in range(2))
    server.psql("INSERT INTO t VALUES (8)", database=first)
    assert server.psql("SELECT sum(n) FROM t", database=first).stdout.split()[2] == "15"
    assert server.psql("SELECT sum(n) FROM t", database=second).stdout.split()[2] == "7"
    refused = server.psql("SELECT 1", database=template, check=False)
    assert refused.returncode != 0
    assert "not currently accepting connections" in refused.stderr
